"""How fast each channel's provider answers, as this process has seen it: the average time
per message of its calls, and the calls in flight now.

The senders' bound (flow/senders.py) reads it to tell a slow channel from a fast one and
to count how long a line will take to drain; the provider calls
(deliveries/pipeline/provider_calls.py) write it around each call. State is per process,
in memory, under its own lock: the senders' lock may be held while it is taken, never
the other way round.
"""

from __future__ import annotations

import threading
import time

from django.conf import settings

# How much one call's time moves the channel's average (an exponential moving average):
# a fast provider turning slow is seen within a few calls, and one slow call among fast
# ones does not make it slow.
LATENCY_WEIGHT = 0.3

_lock = threading.Lock()
_latency: dict[str, float] = {}  # channel -> average seconds per provider message
# (channel, thread id) -> when its call in flight began, and how many messages it carries
_calls: dict[tuple[str, int], tuple[float, int]] = {}


def _running_longest(channel: str, now: float) -> float:
    """How long the channel's longest provider call in flight has been running (0: none).

    A call, from `channel_call_begin`: not the time a sender has held its slot, which
    counts its database work too (load, claim, record: under load a hundred times a
    fast provider's call), and made a burst's channel look slow and its deferrals long."""
    return max(
        (now - since for (name, _), (since, _) in _calls.items() if name == channel),
        default=0.0,
    )


def _running_per_message(channel: str, now: float) -> float:
    """How long the channel's calls in flight have taken so far per message they carry
    (the longest; 0: none): a multicast of 25 running for 1 s is 40 ms a delivery."""
    return max(
        ((now - since) / count for (name, _), (since, count) in _calls.items() if name == channel),
        default=0.0,
    )


def channel_average_seconds(channel: str) -> float:
    """The channel's average provider time per message (0: no call finished yet)."""
    with _lock:
        return _latency.get(channel, 0.0)


def channel_slow_at(channel: str, now: float) -> bool:
    """Is the channel slow at `now` (monotonic): a slow average, or a call running longer
    than NOTIFY_CHANNEL_SLOW_SECONDS."""
    bound = settings.NOTIFY_CHANNEL_SLOW_SECONDS
    with _lock:
        return _latency.get(channel, 0.0) > bound or _running_longest(channel, now) > bound


def channel_slow(*, channel: str) -> bool:
    """Is this channel's provider slow, as this process has seen it?"""
    return channel_slow_at(channel, time.monotonic())


def channel_call_seconds(channel: str, now: float) -> float:
    """About how long one message of the channel takes its provider now: the average, or
    the call in flight for longest when that is longer (a provider that just turned
    slow), both per message: what a line counts for each delivery ahead. Per call, a
    batch of 25 in flight counted 25 times over and deferred the next batches by a
    whole order bound before the first answer came."""
    with _lock:
        return max(_latency.get(channel, 0.0), _running_per_message(channel, now))


def channel_call_begin(*, channel: str, count: int = 1) -> None:
    """This thread calls `channel`'s provider now for `count` messages (a multicast or
    an overlapped batch sends many); `channel_call_timed` ends the call."""
    now = time.monotonic()
    with _lock:
        _calls[(channel, threading.get_ident())] = (now, max(1, count))


def channel_call_timed(*, channel: str, seconds: float, count: int = 1) -> None:
    """A provider call of `channel` took `seconds` for `count` messages (a multicast
    sends many): fold it into the channel's average, and end this thread's call."""
    per_message = seconds / max(1, count)
    with _lock:
        previous = _latency.get(channel)
        _latency[channel] = (
            per_message
            if previous is None
            else previous + LATENCY_WEIGHT * (per_message - previous)
        )
        _calls.pop((channel, threading.get_ident()), None)
