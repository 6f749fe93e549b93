"""Each channel's own share of a worker's sender threads, bounded tighter while slow.

A worker process serves one queue class (`high`, `medium`, `low`) with one pool of
threads, and a send message of any channel may land on any thread. Without a bound, a
provider that is slow but still answering (an SMTP relay taking 20 s a message, well
inside its deadline, so the breaker never hears of a failure) would end up holding every
thread of the class, and login codes by SMS and push would queue behind it.

So a send takes a slot of its channel (per queue class, in this process) before it
loads anything. A channel has at most NOTIFY_CHANNEL_SENDERS[channel] slots, and never
more than half the process's threads (rounded up: an odd pool of 3 gives 2), so the
other channels always keep the rest. While
the channel is slow — its calls take longer than NOTIFY_CHANNEL_SLOW_SECONDS on average,
or one has been running longer than that — it has only NOTIFY_CHANNEL_SLOW_SENDERS: a
slow provider is limited by its slowness, as the breaker limits a failing one. A send
that finds no slot gives its thread back at once: its message is published again with a
countdown (about the channel's time per message while slow) and it loses nothing —
the delivery rows are untouched and still the record.

State is per process, in memory, with no round trip: the bound protects this process's
threads, which is what a slow provider would take. Prefork children run one task each,
so there it never refuses anything.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from django.conf import settings

# How much one call's time moves the channel's average (an exponential moving average):
# a fast provider turning slow is seen within a few calls, and one slow call among fast
# ones does not make it slow.
LATENCY_WEIGHT = 0.3


@dataclass
class _Lane:
    """One channel's slots in one queue class: thread id -> when it last made progress."""

    busy: dict[int, float] = field(default_factory=dict)


_lock = threading.Lock()
_lanes: dict[tuple[str, str], _Lane] = {}
_latency: dict[str, float] = {}  # channel -> average seconds per provider call


def channel_sender_limit(*, channel: str, slow: bool) -> int:
    """How many of a worker's threads one channel may hold at once in one queue class."""
    threads = settings.NOTIFY_WORKER_THREADS
    limit = settings.NOTIFY_CHANNEL_SENDERS.get(channel, threads)
    if slow:
        limit = min(limit, settings.NOTIFY_CHANNEL_SLOW_SENDERS)
    return max(1, min(limit, (threads + 1) // 2))


def _slow(channel: str, now: float) -> bool:
    """Is the channel slow now: a slow average, or a call running longer than the bound."""
    bound = settings.NOTIFY_CHANNEL_SLOW_SECONDS
    if _latency.get(channel, 0.0) > bound:
        return True
    return any(
        now - since > bound
        for (_, lane_channel), lane in _lanes.items()
        if lane_channel == channel
        for since in lane.busy.values()
    )


def channel_slow(*, channel: str) -> bool:
    """Is this channel's provider slow, as this process has seen it?"""
    with _lock:
        return _slow(channel, time.monotonic())


def channel_sender_take(*, channel: str, queue: str) -> bool:
    """Take one of the channel's slots for this thread; False when they are all taken."""
    now = time.monotonic()
    with _lock:
        lane = _lanes.setdefault((queue, channel), _Lane())
        if len(lane.busy) >= channel_sender_limit(channel=channel, slow=_slow(channel, now)):
            return False
        lane.busy[threading.get_ident()] = now
        return True


def channel_sender_give(*, channel: str, queue: str) -> None:
    """Give this thread's slot back."""
    with _lock:
        lane = _lanes.get((queue, channel))
        if lane is not None:
            lane.busy.pop(threading.get_ident(), None)


@contextmanager
def channel_sender(*, channel: str | None, queue: str | None) -> Iterator[bool]:
    """A slot of `channel` in `queue` for the duration of the block: yields whether one
    was free. A message that does not say its channel (published before channels were
    named in send messages) goes without one."""
    if channel is None or queue is None:
        yield True
        return
    taken = channel_sender_take(channel=channel, queue=queue)
    try:
        yield taken
    finally:
        if taken:
            channel_sender_give(channel=channel, queue=queue)


def channel_call_timed(*, channel: str, seconds: float, count: int = 1) -> None:
    """A provider call of `channel` took `seconds` for `count` messages (a multicast
    sends many): fold it into the channel's average, and note this thread's progress."""
    now = time.monotonic()
    per_message = seconds / max(1, count)
    with _lock:
        previous = _latency.get(channel)
        _latency[channel] = (
            per_message
            if previous is None
            else previous + LATENCY_WEIGHT * (per_message - previous)
        )
        ident = threading.get_ident()
        for (_, lane_channel), lane in _lanes.items():
            if lane_channel == channel and ident in lane.busy:
                lane.busy[ident] = now


def channel_defer_seconds(*, channel: str) -> float:
    """How long a send refused a slot waits before its message comes back: about one
    call's time while the channel is slow (a slot frees no sooner), else a second."""
    with _lock:
        slow = _slow(channel, time.monotonic())
        latency = _latency.get(channel, 0.0)
    wait = max(latency, settings.NOTIFY_CHANNEL_DEFER) if slow else settings.NOTIFY_CHANNEL_DEFER
    return min(wait, settings.NOTIFY_CHANNEL_DEFER_MAX)


def channel_senders_reset() -> None:
    """Forget every slot and average (a test starts from a fresh process's state)."""
    with _lock:
        _lanes.clear()
        _latency.clear()
