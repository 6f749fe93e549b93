"""The bench as a tiny Django app (listed only in bench.settings).

With BENCH_COUNT_SQL=1 a process counts every SQL statement it runs and, at exit, adds
the total to a Redis key (BENCH_SQL_KEY), so the bench can print statements per event
for the worker and relay processes. Counting costs one locked increment per statement.
With BENCH_READY_KEY set, a Celery worker writes the time it became ready to that key,
so the bench can tell its start-up from its draining.
"""

from __future__ import annotations

import atexit
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


statements = _Counter()


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


def _report_at_exit(key: str) -> None:
    if not statements.value:
        return
    from django_redis import get_redis_connection

    get_redis_connection("default").incrby(key, statements.value)


def _note_ready(key: str) -> Callable[..., None]:
    def note(**kwargs: Any) -> None:
        from django_redis import get_redis_connection

        get_redis_connection("default").set(key, repr(time.time()))

    return note


class BenchConfig(AppConfig):
    name = "bench"
    label = "bench"

    def ready(self) -> None:
        if os.environ.get("BENCH_COUNT_SQL") == "1":
            connection_created.connect(_wrap_connection, dispatch_uid="bench-count-sql")
            atexit.register(_report_at_exit, os.environ.get("BENCH_SQL_KEY", "bench:sql"))
        ready_key = os.environ.get("BENCH_READY_KEY")
        if ready_key:
            from celery.signals import worker_ready

            worker_ready.connect(_note_ready(ready_key), weak=False)
