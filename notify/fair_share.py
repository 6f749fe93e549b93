"""Fair shares across producers at the outbox relay: the scheduling rule, as plain
functions.

One producer's flood must not delay another producer's notifications of the same class.
The relay keeps a flood in the outbox (cheap, durable, in order) and lets only about
NOTIFY_OUTBOX_FAIR_WINDOW seconds of the class's sending be routed-but-unsent at a time;
what frees up each round goes first to the producers the relay published least for
lately, so a newcomer's rows go out in the next round instead of behind the backlog
(docs/pipeline.md, "Fair shares across producers").
"""

from __future__ import annotations

import heapq
import math
import time
from collections import deque
from collections.abc import Callable, Hashable, Mapping
from typing import TypeVar

K = TypeVar("K", bound=Hashable)

# How long the relay remembers what it published for each producer: long enough to see
# a flood for what it is, short enough that a producer gone quiet is a newcomer again.
RECENT_SECONDS = 10.0


def fair_share_budget(
    *,
    window_seconds: float,
    rate: float | None,
    in_flight: int,
    most: int,
    burst: float = 0,
    quiet_seconds: float = math.inf,
) -> int:
    """How many rows of a class the relay may publish now: what keeps the class's
    routed-but-unsent work within `window_seconds` of its provider `rate` (per second),
    given `in_flight` (rows published and not yet routed, plus deliveries routed and not
    yet sent), and never more than `most` (a round's batch). No rate known (nothing of
    the class on a rate-limited channel): `most`.

    A class with nothing in flight may publish what the provider's bucket has refilled
    since the class last published (`quiet_seconds` ago), up to its `burst`: after a
    quiet spell the bucket sends that many at once, so a lone producer's batch is not
    paced by the window. A flood's in-flight work drains to nothing between two relay
    rounds too, and then its bucket is empty: granting it the whole burst there put a
    burst of the flood (two seconds of email at the default SMTP limit) ahead of every
    newcomer, over and over."""
    if rate is None:
        return max(0, most - in_flight)
    capacity = max(1, math.ceil(window_seconds * rate))
    if in_flight == 0:
        capacity = max(capacity, math.floor(min(burst, quiet_seconds * rate)))
    return max(0, min(most, capacity - in_flight))


def fair_share_allocate(
    *, waiting: Mapping[K, int], recent: Mapping[K, int], budget: int
) -> dict[K, int]:
    """How many of each producer's waiting rows to publish out of `budget`.

    Water-filling from the bottom: each row goes to the producer with the fewest rows
    published lately (`recent`, plus what this round already gave it) that still has
    rows waiting; a tie goes to the producer given fewer in this round. A producer
    that has not published lately therefore takes the whole budget until it has
    caught up with the others, and two floods share it evenly.
    """
    given: dict[K, int] = {producer: 0 for producer in waiting}
    heap = [
        (recent.get(producer, 0), 0, index, producer)
        for index, (producer, count) in enumerate(waiting.items())
        if count > 0
    ]
    heapq.heapify(heap)
    left = budget
    while left > 0 and heap:
        level, round_given, index, producer = heapq.heappop(heap)
        given[producer] += 1
        left -= 1
        if given[producer] < waiting[producer]:
            heapq.heappush(heap, (level + 1, round_given + 1, index, producer))
    return {producer: count for producer, count in given.items() if count}


class RecentPublishes:
    """What the relay published per producer within the last RECENT_SECONDS (per
    process: each relay shares the budget it reads from the database, and its own
    memory of who had the last turns is enough to take turns)."""

    def __init__(self, *, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._events: deque[tuple[float, Hashable, int]] = deque()
        self._counts: dict[Hashable, int] = {}
        self._last = -math.inf  # kept past the memory: how long the class has been quiet

    def add(self, producer: Hashable, count: int) -> None:
        """Record `count` rows published for `producer` now."""
        self._last = self._clock()
        self._events.append((self._last, producer, count))
        self._counts[producer] = self._counts.get(producer, 0) + count

    def quiet_seconds(self) -> float:
        """Seconds since the last row was recorded (infinite before any)."""
        return self._clock() - self._last

    def counts(self) -> dict[Hashable, int]:
        """Rows published per producer within the memory, older ones forgotten."""
        horizon = self._clock() - RECENT_SECONDS
        while self._events and self._events[0][0] < horizon:
            _, producer, count = self._events.popleft()
            self._counts[producer] -= count
            if not self._counts[producer]:
                del self._counts[producer]
        return dict(self._counts)


class PublishedUnrouted:
    """Ids the relay published lately that may not be routed yet (per class): the part
    of the in-flight work the deliveries table cannot show yet. An id is forgotten once
    routed, or after `forget_after` seconds (a route that keeps failing is the route
    sweeper's to republish; it must not hold the class's budget for ever)."""

    def __init__(self, *, forget_after: float, clock: Callable[[], float] = time.monotonic):
        self._forget_after = forget_after
        self._clock = clock
        self._ids: dict[object, float] = {}

    def add(self, ids: list[object]) -> None:
        now = self._clock()
        self._ids.update(dict.fromkeys(ids, now))

    def pending(self) -> list[object]:
        """The remembered ids, those older than `forget_after` dropped."""
        horizon = self._clock() - self._forget_after
        self._ids = {key: at for key, at in self._ids.items() if at >= horizon}
        return list(self._ids)

    def keep_only(self, unrouted: set[object]) -> None:
        """Forget every remembered id not in `unrouted` (it has been routed)."""
        self._ids = {key: at for key, at in self._ids.items() if key in unrouted}
