"""Each channel's own share of a worker's sender threads, bounded tighter while slow, and
a line in memory where a send waits for its channel's sender.

A worker process serves one queue class (`high`, `medium`, `low`) with one pool of
threads, and a send message of any channel may land on any thread. Without a bound, a
provider that is slow but still answering (an SMTP relay taking 20 s a message, well
inside its deadline, so the breaker never hears of a failure) would end up holding every
thread of the class, and login codes by SMS and push would queue behind it.

So a send takes a slot of its channel (per queue class, in this process) before it
loads anything. On the isolated classes (NOTIFY_CHANNEL_ISOLATED_QUEUES: `high`,
`medium`) a channel has at most NOTIFY_CHANNEL_SENDERS[channel] slots, and never more
than half the process's threads (rounded up: an odd pool of 3 gives 2), so the other
channels always keep the rest; on the others (`low`, where a campaign's email is most of
the work) a channel may use every thread. While the channel is slow — its calls take
longer than NOTIFY_CHANNEL_SLOW_SECONDS on average, or one provider call has been
running longer than that — it has only NOTIFY_CHANNEL_SLOW_SENDERS, on every class: a
slow provider is limited by its slowness, as the breaker limits a failing one.

A send that finds no slot gives its thread back at once and waits in its channel's line
here, in memory: the next thread of that channel to finish a send runs it, still holding
its slot (`channel_sender_serve`). So waiting costs no thread, no broker round trip and
no delay in whole seconds. The line is bounded: a send joins it only while the sends
ahead of it should be done within NOTIFY_CHANNEL_WAIT_MAX (at the channel's pace,
`_drain_seconds`), and at most NOTIFY_CHANNEL_WAITING_MAX wait; one that would wait longer
is published again with a countdown of about its wait behind the line and behind the
sends already deferred (`channel_defer_seconds`; while the provider is fast, no longer
than the order bound, `_countdown_max`), so a deep backlog comes back spread over the
time it takes, about once each, rather than all of it every call; one that has waited
longer than the bound goes back to the broker at once. A thread serves the line for at most
NOTIFY_CHANNEL_SERVE_MAX, so the message it began with is acknowledged well inside the
broker's consumer timeout; the last sender of a channel to leave hands the rest of the
line back to the broker, so a waiting send never outlives the senders that owe it. When
the worker begins to shut down (`channel_lines_close`), every line goes back to the
broker at the next sender's turn, and no send joins one.

A send's message is acknowledged when its thread gives it up, so a waiting send is also
written to Redis as it joins the line, under a lease the worker keeps alive
(flow/line_lease.py): if the process dies, another worker publishes it
again within seconds of the lease running out. The delivery row (untouched: no claim was
taken) stays the record should Redis be away too: the sweeper publishes it again once
NOTIFY_RETRY_RESWEEP_AFTER has passed since its last publish.

State is per process, in memory, with no round trip but the record of a send joining a
line: the bound protects this process's threads, which is what a slow provider would
take. Prefork children run one task each, so there it never refuses anything.
"""

from __future__ import annotations

import heapq
import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings

from flow.line_lease import line_join_record, line_left, line_token
from flow.pace import (
    LATENCY_WEIGHT,
    channel_average_seconds,
    channel_call_seconds,
    channel_slow_at,
)

logger = logging.getLogger(__name__)


@dataclass
class _Waiting:
    """A send waiting in its channel's line: what to send, since when, and its token in
    the line's record outside the process (flow/line_lease.py)."""

    work: Any
    since: float
    token: str = ""


@dataclass
class _Lane:
    """One channel's slots in one queue class: thread id -> when it took the slot;
    the sends waiting for one of them, oldest first; and how fast they drain."""

    busy: dict[int, float] = field(default_factory=dict)
    waiting: deque[_Waiting] = field(default_factory=deque)
    # A heap of (when each deferred send is due, how many deliveries it carries), and
    # how many deliveries those carry in all.
    deferred: list[tuple[float, int]] = field(default_factory=list)
    deferred_deliveries: int = 0
    # thread id -> when its send began here, and how many deliveries it carries
    started: dict[int, tuple[float, int]] = field(default_factory=dict)
    # How long a send holds a slot here and how many deliveries it carries, both on
    # average (0: none done yet); their ratio is the line's real drain time per delivery,
    # whatever the sends do (a batch, a held delivery's look). A ratio of the averages,
    # not an average of ratios: one held look's slot time is not what each member of a
    # batch of 25 costs.
    slot_seconds: float = 0.0
    slot_deliveries: float = 0.0

    def delivery_seconds(self) -> float:
        """How long one delivery of the sends here holds a slot (0: none done yet)."""
        return self.slot_seconds / self.slot_deliveries if self.slot_deliveries else 0.0


@dataclass(frozen=True)
class SenderTurn:
    """What a send found: a slot (`taken`: send now, then serve the line), a place in the
    line (`waiting`: a sender of its channel will run it), or neither: publish it again,
    `defer` seconds out (None: at once)."""

    taken: bool = False
    waiting: bool = False
    defer: float | None = None


_lock = threading.Lock()
_lanes: dict[tuple[str, str], _Lane] = {}
_closing = threading.Event()  # the worker is shutting down: lines go back to the broker


def channel_sender_limit(*, channel: str, slow: bool, queue: str | None = None) -> int:
    """How many of a worker's threads one channel may hold at once in one queue class."""
    threads = settings.NOTIFY_WORKER_THREADS
    limit = threads
    if queue is None or queue in settings.NOTIFY_CHANNEL_ISOLATED_QUEUES:
        limit = min(settings.NOTIFY_CHANNEL_SENDERS.get(channel, threads), (threads + 1) // 2)
    if slow:
        limit = min(limit, settings.NOTIFY_CHANNEL_SLOW_SENDERS)
    return max(1, limit)


def _size(work: Any) -> int:
    """How many deliveries a send carries (a batch's ids, or one)."""
    return max(1, len(work)) if isinstance(work, list) else 1


def _line_deliveries(lane: _Lane) -> int:
    """How many deliveries the sends waiting in the line carry."""
    return sum(_size(waiting.work) for waiting in lane.waiting)


def _deferred_wait(lane: _Lane, *, limit: int, seconds: float, now: float, size: int) -> float:
    """How long one more send of `size` deliveries would wait for a sender here: the
    deliveries ahead of it — in the line and in the sends deferred that are not back
    yet — and its own, `limit` at a time, `seconds` each."""
    while lane.deferred and lane.deferred[0][0] <= now:
        lane.deferred_deliveries -= heapq.heappop(lane.deferred)[1]
    ahead = _line_deliveries(lane) + lane.deferred_deliveries
    return (ahead + size) / limit * seconds


def _drain_seconds(lane: _Lane, channel: str, slow: bool, seconds: float) -> float:
    """How long each delivery ahead of a send holds a slot: what the line's admission
    and a deferral's countdown count.

    While the channel is fast, what a delivery of the sends here has taken (and no less
    than a provider call): under a burst that is mostly database work (load, claim,
    record, a held delivery's look), far more than a fast provider's call, and what the
    line really drains at. Counting the provider's milliseconds instead let the line
    fill with thousands of deliveries it then took minutes to drain. While slow, or
    before any send is done here, `seconds` (the provider's call time): the provider is
    what the sends wait for."""
    if slow or not lane.delivery_seconds():
        return seconds
    return max(lane.delivery_seconds(), channel_average_seconds(channel))


def _countdown_max(slow: bool) -> float:
    """The longest a send may be deferred for its channel's line.

    While slow, NOTIFY_CHANNEL_DEFER_MAX: a slow provider is limited to its few senders,
    and its backlog comes back spread over as long as they need. While fast, no longer
    than the order bound (NOTIFY_ORDER_WAIT_MAX) as well: the line then drains at the
    pace of the sends' database work, and the count of sends deferred ahead overstates
    it (a held delivery's deferred look is mostly done by the wake before it is back,
    and comes back to find nothing to do), so a longer countdown only leaves the
    burst's last emails, held for an earlier one, past their order bound on an idle
    channel. The cost: a backlog deeper than the bound comes back once a bound."""
    if slow:
        return settings.NOTIFY_CHANNEL_DEFER_MAX
    bound = min(settings.NOTIFY_CHANNEL_DEFER_MAX, settings.NOTIFY_ORDER_WAIT_MAX)
    return max(settings.NOTIFY_CHANNEL_DEFER, bound)


def channel_sender_turn(*, channel: str, queue: str, work: Any) -> SenderTurn:
    """A slot of the channel for this thread, else a place in its line for `work` (one
    sender of the channel is then busy and will run it), else a deferral.

    One decision under one lock: a send joins the line only while every slot is taken,
    so there is always a sender that will reach it."""
    now = time.monotonic()
    with _lock:
        lane = _lanes.setdefault((queue, channel), _Lane())
        slow = channel_slow_at(channel, now)
        limit = channel_sender_limit(channel=channel, slow=slow, queue=queue)
        if len(lane.busy) < limit:
            _slot_take(lane, now, work)
            return SenderTurn(taken=True)
        if _closing.is_set():
            return SenderTurn(defer=None)
        drain = _drain_seconds(lane, channel, slow, channel_call_seconds(channel, now))
        line_wait = (_line_deliveries(lane) + _size(work)) / limit * drain
        if (
            len(lane.waiting) < settings.NOTIFY_CHANNEL_WAITING_MAX
            and line_wait <= settings.NOTIFY_CHANNEL_WAIT_MAX
        ):
            token = line_token()
            lane.waiting.append(_Waiting(work=work, since=now, token=token))
        else:
            token = ""
            # Counted behind those already deferred: a backlog comes back spread over
            # the time it takes to send, not all at once to be deferred again.
            countdown = min(
                channel_defer_seconds(
                    wait=_deferred_wait(lane, limit=limit, seconds=drain, now=now, size=_size(work))
                ),
                _countdown_max(slow),
            )
            heapq.heappush(lane.deferred, (now + countdown, _size(work)))
            lane.deferred_deliveries += _size(work)
    if token:
        # Outside the lock: a round trip. Should its send have left the line already,
        # the record is removed at the next heartbeat all the same.
        line_join_record(token=token, channel=channel, queue=queue, work=work)
        return SenderTurn(waiting=True)
    return SenderTurn(defer=countdown)


def channel_sender_take(*, channel: str, queue: str, work: Any) -> bool:
    """A slot of the channel for this thread if one is free now and the channel is not
    slow; never a place in the line nor a deferral. For a send that has another way to
    go (routing publishes it instead): it sends at once here, or not here at all. A
    taken slot is given back by `channel_sender_serve`, as a send task's is."""
    now = time.monotonic()
    with _lock:
        lane = _lanes.setdefault((queue, channel), _Lane())
        if _closing.is_set() or lane.waiting or channel_slow_at(channel, now):
            return False
        if len(lane.busy) >= channel_sender_limit(channel=channel, slow=False, queue=queue):
            return False
        _slot_take(lane, now, work)
        return True


def _slot_take(lane: _Lane, now: float, work: Any) -> None:
    """This thread holds one of the lane's slots from `now`, for `work` (under _lock)."""
    lane.busy[threading.get_ident()] = now
    lane.started[threading.get_ident()] = (now, _size(work))


def channel_defer_seconds(*, wait: float) -> float:
    """The countdown of a send that could not wait here for `wait` seconds: about that
    wait (a slot frees no sooner), at least NOTIFY_CHANNEL_DEFER and at most
    NOTIFY_CHANNEL_DEFER_MAX."""
    return min(max(wait, settings.NOTIFY_CHANNEL_DEFER), settings.NOTIFY_CHANNEL_DEFER_MAX)


def _line_next(*, channel: str, queue: str, started: float) -> tuple[Any, list[Any]]:
    """For a thread holding a slot whose send is done: the next waiting send it runs
    (None: it gives its slot back), and the waiting sends to hand back to the broker.

    It serves while the channel's limit still counts it and it has served less than
    NOTIFY_CHANNEL_SERVE_MAX. Sends that have waited longer than NOTIFY_CHANNEL_WAIT_MAX
    are handed back; so is the whole line when the last sender leaves it, or when the
    worker is shutting down."""
    now = time.monotonic()
    ident = threading.get_ident()
    handed_back: list[Any] = []
    with _lock:
        lane = _lanes.setdefault((queue, channel), _Lane())
        began = lane.started.pop(ident, None)
        if began is not None:
            if not lane.slot_deliveries:
                lane.slot_seconds, lane.slot_deliveries = now - began[0], float(began[1])
            else:
                lane.slot_seconds += LATENCY_WEIGHT * (now - began[0] - lane.slot_seconds)
                lane.slot_deliveries += LATENCY_WEIGHT * (began[1] - lane.slot_deliveries)
        while lane.waiting and (
            _closing.is_set() or now - lane.waiting[0].since > settings.NOTIFY_CHANNEL_WAIT_MAX
        ):
            handed_back.append(_line_leave(lane))
        limit = channel_sender_limit(
            channel=channel, slow=channel_slow_at(channel, now), queue=queue
        )
        if (
            lane.waiting
            and len(lane.busy) <= limit
            and now - started < settings.NOTIFY_CHANNEL_SERVE_MAX
        ):
            lane.busy[ident] = now
            work = _line_leave(lane)
            lane.started[ident] = (now, _size(work))
            return work, handed_back
        lane.busy.pop(ident, None)
        while not lane.busy and lane.waiting:
            handed_back.append(_line_leave(lane))
        return None, handed_back


def _line_leave(lane: _Lane) -> Any:
    """The first send of the lane's line leaves it (under _lock): its work."""
    waiting = lane.waiting.popleft()
    line_left(waiting.token)
    return waiting.work


def channel_sender_serve(
    *,
    channel: str,
    queue: str,
    started: float,
    run: Callable[[Any], None],
    hand_back: Callable[[Any], None],
) -> None:
    """This thread's send took a slot at `started` (time.monotonic) and is done: run the
    sends waiting in the channel's line (`run`) while it may, hand back those that
    waited too long (`hand_back`, which publishes them again), then give the slot back.

    One waiting send that raises is logged and the next runs: its row is the record,
    and the sweeper finds it."""
    while True:
        work, handed_back = _line_next(channel=channel, queue=queue, started=started)
        for late in handed_back:
            try:
                hand_back(late)
            except Exception:  # hand_back logs its own failures; the row is the record
                logger.exception("%s sender: could not hand %s back", channel, late)
        if work is None:
            return
        try:
            run(work)
        except Exception:
            logger.exception("%s sender: a waiting send %s raised", channel, work)


def channel_waiting_count(*, channel: str, queue: str) -> int:
    """How many sends wait in the channel's line in this process."""
    with _lock:
        lane = _lanes.get((queue, channel))
        return len(lane.waiting) if lane is not None else 0


def channel_lines_close() -> None:
    """The worker is shutting down: from now on no send joins a line, and each sender
    hands its channel's line back to the broker instead of serving it, so nothing waits
    here on a process manager that may not wait for it."""
    _closing.set()
