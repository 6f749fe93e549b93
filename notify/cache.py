"""A small in-process cache with a time to live, for reads on every request that
change rarely (API keys, categories). Each process keeps its own; a change takes effect
everywhere within the TTL, which is a setting."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

V = TypeVar("V")


class TtlCache(Generic[V]):
    """`get(key, load)`: the value cached for `key` if younger than `ttl()` seconds, else
    `load()`'s answer, which is cached (None too: unknown keys are asked for often)."""

    def __init__(self, ttl: Callable[[], float], max_entries: int = 10_000) -> None:
        self._ttl = ttl
        self._max_entries = max_entries
        self._entries: dict[Hashable, tuple[float, V]] = {}
        self._lock = threading.Lock()

    def get(self, key: Hashable, load: Callable[[], V]) -> V:
        ttl = self._ttl()
        now = time.monotonic()
        found = self._entries.get(key)
        if found is not None and now - found[0] < ttl:
            return found[1]
        value = load()
        if ttl > 0:
            with self._lock:
                if len(self._entries) >= self._max_entries:
                    self._entries.clear()  # crude, and rare: keys are few in practice
                self._entries[key] = (now, value)
        return value

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
