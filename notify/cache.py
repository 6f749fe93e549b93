"""A small in-process cache with a time to live, for reads on every request that
change rarely (API keys, categories, a user id's recipient). Each process keeps its own;
a change takes effect everywhere within the TTL, which is a setting."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

V = TypeVar("V")


class TtlCache(Generic[V]):
    """`get(key, load)`: the value cached for `key` if younger than `ttl()` seconds, else
    `load()`'s answer, which is cached (None too, unless `keep_none` is off: unknown keys
    are asked for often, but some callers must see a new row at once)."""

    def __init__(
        self, ttl: Callable[[], float], max_entries: int = 10_000, *, keep_none: bool = True
    ) -> None:
        self._ttl = ttl
        self._max_entries = max_entries
        self._keep_none = keep_none
        self._entries: dict[Hashable, tuple[float, V]] = {}
        self._lock = threading.Lock()

    def get(self, key: Hashable, load: Callable[[], V]) -> V:
        ttl = self._ttl()
        now = time.monotonic()
        found = self._entries.get(key)
        if found is not None and now - found[0] < ttl:
            return found[1]
        value = load()
        if ttl > 0 and (value is not None or self._keep_none):
            with self._lock:
                if len(self._entries) >= self._max_entries:
                    self._prune(now - ttl)
                self._entries[key] = (now, value)
        return value

    def peek(self, key: Hashable) -> V | None:
        """The value cached for `key` if still fresh, else None; never loads."""
        found = self._entries.get(key)
        if found is not None and time.monotonic() - found[0] < self._ttl():
            return found[1]
        return None

    def _prune(self, oldest: float) -> None:
        # Expired entries first; when every entry is fresh, all of them (crude, and rare:
        # it takes max_entries distinct keys within one TTL).
        self._entries = {k: e for k, e in self._entries.items() if e[0] > oldest}
        if len(self._entries) >= self._max_entries:
            self._entries.clear()

    def forget(self, key: Hashable) -> None:
        """Drop `key`, so this process's next `get` loads it again."""
        with self._lock:
            self._entries.pop(key, None)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
