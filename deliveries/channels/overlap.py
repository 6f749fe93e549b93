"""A batch's provider calls kept in flight together, a bounded number at once.

Web Push's posts and SMPP's submits spend their time waiting for the provider's answer,
so a batch sends them overlapped instead of one after another: up to `limit` calls run
at once on a pool of threads shared by the process, and each answer is handed back to
the caller's thread as it comes (the caller marks a sent message at once, as before).

What one at a time gave is kept:
- the calls of one order lane (one person's, on one channel) still go one after the
  other, each only after the answer to the one before, in the order given;
- each call is prepared in the caller's thread just before it starts (what touches the
  database, renders a template or reads thread-local state stays there), so the call
  in the pool only does the provider's work: encryption, the request, its answer;
- a call, or its preparation, that raises is answered by its exception, never lost.

Shared by the channels (as base.py and deadline.py are): it knows nothing of any one.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Hashable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import TypeVar

R = TypeVar("R")

_pools: dict[tuple[str, int], tuple[int, ThreadPoolExecutor]] = {}
_pools_lock = threading.Lock()


def call_pool(name: str, threads: int) -> ThreadPoolExecutor:
    """This process's pool of `threads` call threads named `name` (made on first use,
    and made anew in a forked child, which does not inherit its parent's threads)."""
    pid = os.getpid()
    with _pools_lock:
        found = _pools.get((name, threads))
        if found is None or found[0] != pid:
            pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix=name)
            found = _pools[(name, threads)] = (pid, pool)
        return found[1]


def _timed(call: Callable[[], R]) -> tuple[R | Exception, float]:
    clock = time.monotonic()
    try:
        answer: R | Exception = call()
    except Exception as error:  # the caller classifies it, as a raised send
        answer = error
    return answer, time.monotonic() - clock


def calls_overlapped(
    prepare: Callable[[int], Callable[[], R]],
    *,
    lanes: Sequence[Hashable],
    limit: int,
    pool: ThreadPoolExecutor,
    before_each: Callable[[], object] | None = None,
) -> Iterator[tuple[int, R | Exception, float]]:
    """Run call number 0 … len(lanes)-1, at most `limit` at once, and yield
    (index, answer or exception, seconds the call took) as each ends.

    `prepare(index)` runs in this thread when the call may start and returns the call to
    run in `pool`; `before_each` runs before each preparation (campaign work yields to
    login codes there). A call starts only when every earlier call of its lane has
    answered. Closing the iterator early waits for the calls in flight to end.
    """
    waiting = list(range(len(lanes)))  # not started yet, in the given order
    busy: set[Hashable] = set()  # lanes with a call in flight
    running: dict[Future, int] = {}
    try:
        while waiting or running:
            started: set[int] = set()
            for index in waiting:
                if len(running) >= limit:
                    break
                if lanes[index] in busy:
                    continue  # its lane's earlier call has not answered yet
                started.add(index)
                busy.add(lanes[index])
                if before_each is not None:
                    before_each()
                try:
                    call = prepare(index)
                except Exception as error:
                    busy.discard(lanes[index])
                    yield index, error, 0.0
                    continue
                running[pool.submit(_timed, call)] = index
            waiting = [index for index in waiting if index not in started]
            if not running:
                continue
            done, _ = wait(running, return_when=FIRST_COMPLETED)
            for future in sorted(done, key=running.__getitem__):
                index = running.pop(future)
                busy.discard(lanes[index])
                answer, seconds = future.result()
                yield index, answer, seconds
    finally:
        if running:  # the caller stopped early: no call outlives its batch
            wait(running)
