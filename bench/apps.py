"""The bench as a tiny Django app (listed only in bench.settings).

With BENCH_COUNT_KEY set, a process counts what the bench reports per notification and
keeps the figures in that Redis hash, one field per process and figure ("<pid>:sql"):

  sql    SQL statements run through Django (an execute wrapper on every connection;
         an executemany is one)
  pub    messages published to RabbitMQ: every kombu `Producer.publish`, which Celery's
         send_task and apply_async go through, so the relay's, the workers' and any
         future publisher's are all counted, whatever the task is called
  first  when this process first started a Celery task (time.time())
  last   when it last finished one

A daemon thread writes them every BENCH_COUNT_FLUSH_SECONDS and once more at exit, so
the bench can read a window between two readings while the processes run, or the whole
life of a process after it stopped. Counting costs one locked increment per statement or
message. With BENCH_READY_KEY set, a Celery worker writes the time it became ready to
that key, so the bench can tell its start-up from its draining.
"""

from __future__ import annotations

import atexit
import functools
import os
import threading
import time
from collections.abc import Callable
from typing import Any

from django.apps import AppConfig
from django.db.backends.signals import connection_created


class _Counter:
    def __init__(self) -> None:
        self.value = 0
        self._lock = threading.Lock()

    def add(self) -> None:
        with self._lock:
            self.value += 1

    def restart(self, **kwargs: Any) -> None:
        """Count from zero again (a worker at worker_ready: what it ran to start up is
        start-up, as its CPU before then is)."""
        with self._lock:
            self.value = 0


class _TaskTimes:
    """The first start and the last end of a Celery task in this process."""

    def __init__(self) -> None:
        self.first: float | None = None
        self.last: float | None = None
        self._lock = threading.Lock()

    def started(self, **kwargs: Any) -> None:
        now = time.time()
        with self._lock:
            if self.first is None:
                self.first = now

    def done(self, **kwargs: Any) -> None:
        now = time.time()
        with self._lock:
            self.last = now if self.last is None else max(self.last, now)


statements = _Counter()
publishes = _Counter()
task_times = _TaskTimes()


def count_statements(
    execute: Callable[..., Any], sql: str, params: Any, many: bool, context: dict[str, Any]
) -> Any:
    """A Django execute wrapper: one more statement, then run it."""
    statements.add()
    return execute(sql, params, many, context)


def _wrap_connection(sender: Any, connection: Any, **kwargs: Any) -> None:
    # The same wrapper object may be handed a connection again (pooled reconnects).
    if count_statements not in connection.execute_wrappers:
        connection.execute_wrappers.append(count_statements)


def count_publishes() -> None:
    """From now on, count every kombu `Producer.publish` of this process (idempotent).

    A patch of the class, not of one producer: Celery makes producers from its pools,
    and the relay, the workers and the bench itself all publish through them.
    """
    from kombu.messaging import Producer

    original = Producer.publish
    if getattr(original, "bench_counted", False):
        return

    @functools.wraps(original)
    def publish(self: Producer, *args: Any, **kwargs: Any) -> Any:
        publishes.add()
        return original(self, *args, **kwargs)

    publish.bench_counted = True  # type: ignore[attr-defined]
    Producer.publish = publish  # type: ignore[method-assign]


def _flush(key: str) -> None:
    """Write this process's counts into the hash `key` (one HSET)."""
    from django_redis import get_redis_connection

    pid = os.getpid()
    fields: dict[str, str | int] = {f"{pid}:sql": statements.value, f"{pid}:pub": publishes.value}
    if task_times.first is not None:
        fields[f"{pid}:first"] = repr(task_times.first)
    if task_times.last is not None:
        fields[f"{pid}:last"] = repr(task_times.last)
    get_redis_connection("default").hset(key, mapping=fields)


def _flush_forever(key: str, interval: float) -> None:
    while True:
        time.sleep(interval)
        try:
            _flush(key)
        except Exception:  # Redis away for a moment: the next round writes
            continue


def _note_ready(key: str) -> Callable[..., None]:
    def note(**kwargs: Any) -> None:
        from django_redis import get_redis_connection

        get_redis_connection("default").set(key, repr(time.time()))

    return note


def _start_counting(key: str) -> None:
    from celery.signals import task_postrun, task_prerun, worker_ready

    connection_created.connect(_wrap_connection, dispatch_uid="bench-count-sql")
    worker_ready.connect(statements.restart, weak=False, dispatch_uid="bench-count-restart")
    count_publishes()
    task_prerun.connect(task_times.started, weak=False, dispatch_uid="bench-task-start")
    task_postrun.connect(task_times.done, weak=False, dispatch_uid="bench-task-done")
    interval = float(os.environ.get("BENCH_COUNT_FLUSH_SECONDS") or 0.25)
    threading.Thread(
        target=_flush_forever, args=(key, interval), name="bench-counts", daemon=True
    ).start()
    atexit.register(_flush, key)


class BenchConfig(AppConfig):
    name = "bench"
    label = "bench"

    def ready(self) -> None:
        count_key = os.environ.get("BENCH_COUNT_KEY")
        if count_key:
            _start_counting(count_key)
        ready_key = os.environ.get("BENCH_READY_KEY")
        if ready_key:
            from celery.signals import worker_ready

            worker_ready.connect(_note_ready(ready_key), weak=False)
