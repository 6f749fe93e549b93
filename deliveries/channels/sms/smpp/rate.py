"""How fast one bind sends: the throttle pause, and a rate that backs off and recovers.

The rate is per bind (per sender process); the cross-process provider limit is the
shared Redis bucket. This one reacts to what this SMSC answers us: sustained
0x58 halves it step by step, a quiet spell raises it back in small additive steps, and a
step is taken at most once per step interval either way — so one 0x58 in a busy minute
does not cut the rate, and the rate never swings between throttled and full (the
seed's "no see-saw").
"""

from __future__ import annotations

import random
import threading
import time
from collections import deque
from collections.abc import Callable


def throttle_pause(
    retry: int, *, base: float, ceiling: float, jitter: float, rng: random.Random | None = None
) -> float:
    """The pause before throttle retry number `retry` (1-based): base doubling, capped,
    ± `jitter` (a fraction) so many senders do not come back in step."""
    delay = min(ceiling, base * 2 ** min(max(retry - 1, 0), 32))
    spread = (rng or random).uniform(1.0 - jitter, 1.0 + jitter)
    return max(0.0, min(ceiling, delay * spread))


class AdaptiveRate:
    """Submits per second for one bind, with pacing (`reserve`) and AIMD steps."""

    def __init__(
        self,
        *,
        ceiling: float,
        floor: float,
        sustained_count: int,
        sustained_window: float,
        step_interval: float,
        recover_after: float,
        recover_step: float,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.ceiling = ceiling
        self.floor = min(floor, ceiling)
        self.sustained_count = sustained_count
        self.sustained_window = sustained_window
        self.step_interval = step_interval
        self.recover_after = recover_after
        self.recover_step = recover_step
        self._clock = clock
        self._lock = threading.Lock()
        self._rate = ceiling
        self._throttles: deque[float] = deque()
        self._last_throttle = float("-inf")
        self._last_step = float("-inf")
        self._next_slot = float("-inf")

    @property
    def rate(self) -> float:
        with self._lock:
            return self._rate

    def reserve(self) -> float:
        """Take the next send slot; returns how long to wait for it (0 when free now)."""
        with self._lock:
            now = self._clock()
            slot = max(now, self._next_slot)
            self._next_slot = slot + 1.0 / self._rate
            return slot - now

    def throttled(self) -> bool:
        """Note a 0x58; returns True when this one lowered the rate."""
        with self._lock:
            now = self._clock()
            self._last_throttle = now
            self._throttles.append(now)
            while self._throttles and self._throttles[0] < now - self.sustained_window:
                self._throttles.popleft()
            if (
                len(self._throttles) >= self.sustained_count
                and now - self._last_step >= self.step_interval
                and self._rate > self.floor
            ):
                self._rate = max(self.floor, self._rate * 0.5)
                self._last_step = now
                self._throttles.clear()  # the next step needs a new run of 0x58
                return True
            return False

    def accepted(self) -> bool:
        """Note an accepted submit; returns True when this one raised the rate."""
        with self._lock:
            now = self._clock()
            if (
                self._rate < self.ceiling
                and now - self._last_throttle >= self.recover_after
                and now - self._last_step >= self.step_interval
            ):
                self._rate = min(self.ceiling, self._rate + self.ceiling * self.recover_step)
                self._last_step = now
                return True
            return False
