"""What a notification costs: SQL statements, broker messages and PostgreSQL CPU.

- The processes the bench starts count their own statements and publishes (bench.apps,
  with `counting_env`); `read_tally` sums them over every process of a run. A worker
  counts its statements from its worker_ready on: its start-up's are not a
  notification's.
- The bench process counts its own part (the API call of an intake or a launch) with
  `counted_here`, around that call only, so its progress queries are never counted.
- `PgCpu` reads the CPU time of the bench database's backends from /proc (PostgreSQL
  runs on this machine; pg_stat_statements would need a restart to load). Each backend
  is told apart by its application_name, which every process the bench starts gets from
  PGAPPNAME (bench.processes): the bench's own backends are "bench" and left out;
  every other backend of the bench database counts (autovacuum's too: the workload
  made its work). Server-wide work (WAL writer, checkpointer) is no database's, so not
  in it.
"""

from __future__ import annotations

import contextlib
import statistics
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import psycopg

from bench.config import BenchError
from bench.places import Places
from bench.processes import cpu_seconds_of, process_stat
from bench.report import verdict

BENCH_APP = "bench"  # the bench process's application_name (bench.runner)


def counting_env(key: str, flush_seconds: float) -> dict[str, str]:
    """The environment that makes a started process count into the Redis hash `key`."""
    return {"BENCH_COUNT_KEY": key, "BENCH_COUNT_FLUSH_SECONDS": str(flush_seconds)}


@dataclass(frozen=True)
class Tally:
    """Statements and publishes summed over processes; their first and last task."""

    sql: int = 0
    published: int = 0
    first_task: float | None = None
    last_task: float | None = None

    def since(self, earlier: Tally) -> Tally:
        """What was counted between `earlier` and this reading."""
        return Tally(
            self.sql - earlier.sql,
            self.published - earlier.published,
            self.first_task,
            self.last_task,
        )


def read_tally(key: str) -> Tally:
    """The counts the processes wrote to the hash `key` so far (bench.apps)."""
    from django_redis import get_redis_connection

    raw = get_redis_connection("default").hgetall(key)
    sums = {"sql": 0, "pub": 0}
    times: dict[str, list[float]] = {"first": [], "last": []}
    for field, value in raw.items():
        name = field.decode().rsplit(":", 1)[-1]
        if name in sums:
            sums[name] += int(value)
        elif name in times:
            times[name].append(float(value))
    return Tally(
        sums["sql"],
        sums["pub"],
        min(times["first"], default=None),
        max(times["last"], default=None),
    )


@dataclass
class Here:
    """The bench process's own statements and publishes inside `counted_here`."""

    sql: int = 0
    published: int = 0


@contextlib.contextmanager
def counted_here() -> Iterator[Here]:
    """Count the statements and publishes of the bench process inside the block."""
    from django.db import connection

    from bench.apps import count_publishes, publishes

    count_publishes()
    here = Here()
    published_before = publishes.value

    def count(
        execute: Callable[..., Any], sql: str, params: Any, many: bool, context: dict[str, Any]
    ) -> Any:
        here.sql += 1
        return execute(sql, params, many, context)

    with connection.execute_wrapper(count):
        yield here
    here.published = publishes.value - published_before


def _cpu_seconds(pid: int) -> float | None:
    """utime + stime of a PostgreSQL process; None once it is gone (or when PID here is
    not PostgreSQL's: a server on another machine)."""
    stat = process_stat(pid)
    if stat is None or stat[0] != "postgres":
        return None
    return cpu_seconds_of(stat[1])


class PgCpu:
    """CPU seconds the bench database's backends used inside the `with` block, by
    application_name. Backends are looked up every `interval`; one that started inside
    the block counts from zero, one that ended counts up to its last reading."""

    def __init__(self, places: Places, interval: float) -> None:
        self._places = places
        self._interval = interval
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._base: dict[int, float] = {}
        self._last: dict[int, tuple[str, float]] = {}
        self._lock = threading.Lock()
        self.error: str | None = None

    def __enter__(self) -> PgCpu:
        try:
            self._conn = psycopg.connect(
                self._places.maintenance_url(), autocommit=True, connect_timeout=5
            )
        except psycopg.Error as error:
            raise BenchError(f"cannot read the backends' CPU: {error}") from None
        for pid, (app, cpu) in self._read().items():
            self._base[pid] = cpu
            self._last[pid] = (app, cpu)
        self._thread = threading.Thread(target=self._sample, name="pg-cpu", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        with contextlib.suppress(psycopg.Error):
            self._merge(self._read())
        self._conn.close()

    def _read(self) -> dict[int, tuple[str, float]]:
        rows = self._conn.execute(
            "SELECT pid, application_name FROM pg_stat_activity WHERE datname = %s",
            (self._places.database_name,),
        ).fetchall()
        found = {}
        for pid, app in rows:
            cpu = _cpu_seconds(pid)
            if cpu is not None:
                found[pid] = (app or "", cpu)
        if rows and not found:  # none of them runs here: the CPU cannot be read
            self.error = "the database's backends are not processes of this machine"
        return found

    def _merge(self, found: dict[int, tuple[str, float]]) -> None:
        with self._lock:
            for pid, reading in found.items():
                self._base.setdefault(pid, 0.0)
                self._last[pid] = reading

    def restart(self) -> None:
        """Count from now on: what every backend spent so far (a drain's start-up) is left
        out, as the worker's own CPU is."""
        found = self._read()
        with self._lock:
            for pid, (_, cpu) in self._last.items():
                self._base[pid] = cpu
            for pid, reading in found.items():
                self._base[pid] = reading[1]
                self._last[pid] = reading

    def _sample(self) -> None:
        try:
            while not self._stop.wait(self._interval):
                self._merge(self._read())
        except psycopg.Error as error:
            self.error = str(error)

    def by_app(self) -> dict[str, float]:
        """CPU seconds inside the block per application_name."""
        spent: dict[str, float] = {}
        for pid, (app, cpu) in self._last.items():
            spent[app] = spent.get(app, 0.0) + max(0.0, cpu - self._base[pid])
        return spent

    def seconds(self, *, bench: bool = False) -> float:
        """CPU seconds of the processes being measured; with `bench`, of the bench's own.
        NaN when they could not be read (printed as such, never as a small figure)."""
        if self.error:
            return float("nan")
        return sum(s for app, s in self.by_app().items() if (app == BENCH_APP) == bench)


@dataclass(frozen=True)
class Costs:
    """What `notifications` notifications cost in total."""

    notifications: int
    sql: float
    published: float
    pg_cpu: float  # seconds

    @property
    def sql_each(self) -> float:
        return self.sql / self.notifications

    @property
    def published_each(self) -> float:
        return self.published / self.notifications

    @property
    def pg_cpu_ms_each(self) -> float:
        return self.pg_cpu * 1000 / self.notifications


def median_costs(runs: list[Costs]) -> Costs:
    """Per notification, the median of each figure over runs (as one notification)."""
    return Costs(
        1,
        statistics.median(c.sql_each for c in runs),
        statistics.median(c.published_each for c in runs),
        statistics.median(c.pg_cpu / c.notifications for c in runs),
    )


def costs_text(
    costs: Costs, *, sql_target: float | None = None, broker_target: float | None = None
) -> str:
    """'SQL 8.1, broker messages 2.0, PostgreSQL CPU 1.23 ms', with targets beside."""

    def beside(value: float, target: float | None) -> str:
        return f" ({verdict(value, target, at_least=False, unit='')})" if target else ""

    return (
        f"SQL statements {costs.sql_each:.2f}{beside(costs.sql_each, sql_target)}, "
        f"broker messages {costs.published_each:.2f}"
        f"{beside(costs.published_each, broker_target)}, "
        f"PostgreSQL CPU {costs.pg_cpu_ms_each:.2f} ms"
    )
