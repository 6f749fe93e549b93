"""`make bench` (`python -m bench`): the shipped processes against bare baselines.

Standalone: it makes its own database (BENCH_DATABASE, default notify_bench), RabbitMQ
vhost (BENCH_VHOST, notify_bench) and Redis database (BENCH_REDIS_DB, 14), starts what
it measures (scripts/web.sh, scripts/worker.sh, the outbox relay when the checkout has
one, an SMTP sink) on loopback, and stops it all at the end, even on failure. Each
figure is a RATIO to a baseline measured in the same run: medians of BENCH_RUNS runs,
baseline and subject alternating, so a noisy neighbour hits both.

  S1     POST /v1/notifications vs a bare DRF view doing the same two inserts
  S5     GET /v1/users/{id}/unread-count vs a bare view reading one Redis key
  load   BENCH_LOAD_CONNECTIONS clients for BENCH_LOAD_SECONDS: errors, backends, p99
  S2     events drained by the worker (inapp + email) vs no-op tasks, same command

Results go to stdout; progress and process logs to stderr and var/bench/.
BENCH_ONLY=s1,s5,load,s2 picks scenarios. Logs of the processes: var/bench/*.log.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from bench.harness import (
    LOOPBACK,
    ROOT,
    BackendSampler,
    BenchError,
    Load,
    LoadResult,
    Places,
    Proc,
    Stack,
    ensure_database,
    ensure_vhost,
    ensure_wrk,
    env_float,
    env_int,
    free_port,
    machine_line,
    max_connections,
    phase,
    python,
    run_wrk,
    wait_http,
    wait_port,
)

if TYPE_CHECKING:  # Django is set up only after the bench has prepared its places
    from django.test import Client

DEMO_USER = "demo-user"
SCENARIOS = ("s1", "s5", "load", "s2")

# The defaults of scripts/web.sh, scripts/worker.sh, beat.sh and manage.sh, for the
# budget printed next to the measured peak (docs/connections.md works it out).
WEB_POOL_DEFAULT = 10
SMALL_POOL_DEFAULT = 2  # beat and the relay (scripts/beat.sh, scripts/manage.sh)


@dataclass(frozen=True)
class Config:
    """Every knob, from BENCH_* variables; the defaults keep `make bench` near 5 minutes."""

    runs: int
    seconds: float
    warmup_seconds: float
    connections: int
    load_connections: int
    load_seconds: float
    events: int
    pipeline_timeout: float
    wrk_threads: int
    smtp_rate: str
    only: tuple[str, ...]

    @classmethod
    def from_environment(cls) -> Config:
        only = tuple(
            name.strip().lower()
            for name in os.environ.get("BENCH_ONLY", ",".join(SCENARIOS)).split(",")
            if name.strip()
        )
        unknown = set(only) - set(SCENARIOS)
        if unknown:
            raise BenchError(f"BENCH_ONLY: unknown {sorted(unknown)}; known: {SCENARIOS}")
        return cls(
            runs=max(1, env_int("BENCH_RUNS", 3)),
            seconds=env_float("BENCH_SECONDS", 8.0),
            warmup_seconds=env_float("BENCH_WARMUP_SECONDS", 3.0),
            connections=env_int("BENCH_CONNECTIONS", 16),
            load_connections=env_int("BENCH_LOAD_CONNECTIONS", 64),
            load_seconds=env_float("BENCH_LOAD_SECONDS", 60.0),
            events=max(1, env_int("BENCH_EVENTS", 1000)),
            pipeline_timeout=env_float("BENCH_PIPELINE_TIMEOUT", 240.0),
            wrk_threads=max(1, env_int("BENCH_WRK_THREADS", 1)),
            smtp_rate=os.environ.get("BENCH_SMTP_RATE", "1000000:1000000"),
            only=only,
        )


def child_environment(places: Places, config: Config) -> dict[str, str]:
    """The environment of every process the bench starts (and of the bench itself)."""
    env = dict(os.environ)
    for name in ("HOST", "PORT", "BENCH_COUNT_SQL", "BENCH_SQL_KEY", "BENCH_READY_KEY"):
        env.pop(name, None)
    env.update(places.environment())
    env.update(
        {
            "DJANGO_SETTINGS_MODULE": "bench.settings",
            "DJANGO_DEBUG": "0",
            "DJANGO_ALLOWED_HOSTS": "127.0.0.1,localhost,testserver",
            "PYTHONUNBUFFERED": "1",
            # Capacity is measured, not the configured per-key and per-provider limits:
            # the throttle and the SMTP token bucket still run, they just never say no.
            "NOTIFY_API_RATE_PER_SECOND": "1000000",
            "NOTIFY_API_RATE_BURST": "1000000",
            "NOTIFY_RATE_SMTP": config.smtp_rate,
        }
    )
    return env


def manage(env: dict[str, str], *args: str) -> str:
    """`scripts/manage.sh ARGS` (the shipped path) in the bench's environment."""
    done = subprocess.run(
        ["bash", "scripts/manage.sh", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    if done.returncode != 0:
        raise BenchError(f"manage.py {' '.join(args)} failed:\n{done.stdout}{done.stderr}")
    return done.stdout


@dataclass(frozen=True)
class Drain:
    """One timed drain: n messages or events, wall-clock times (time.time())."""

    n: int
    started: float  # the worker process was started
    finished: float  # the last one was done
    ready: float | None = None  # the worker said it was ready to consume
    statements: int = 0  # SQL statements the worker (and relay) reported at exit
    peak_backends: int = 0  # PostgreSQL backends on the bench database, at most

    @property
    def rate(self) -> float:
        return self.n / (self.finished - self.started)

    @property
    def startup(self) -> float | None:
        return self.ready - self.started if self.ready else None

    @property
    def drain_rate(self) -> float | None:
        if self.ready is None or self.finished <= self.ready:
            return None
        return self.n / (self.finished - self.ready)


def ratio(subject: float, baseline: float) -> float:
    return subject / baseline if baseline else float("nan")


def verdict(value: float, target: float, *, at_least: bool) -> str:
    ok = value >= target if at_least else value <= target
    sign = "≥" if at_least else "≤"
    return f"target {sign} {target:g}x: {'met' if ok else 'NOT met'}"


def median_of(results: list[LoadResult], field: Callable[[LoadResult], float]) -> float:
    return statistics.median(field(result) for result in results)


class Bench:
    """One `make bench` run: prepares the places, then runs the chosen scenarios."""

    def __init__(self, config: Config, places: Places, stack: Stack, wrk: str) -> None:
        self.config = config
        self.places = places
        self.stack = stack
        self.wrk_path = wrk
        self.env = child_environment(places, config)
        self.api_key = ""
        self.failed: list[str] = []

    # --- Preparation ------------------------------------------------------------------------

    def prepare(self) -> None:
        with phase("preparing the bench database, vhost and Redis db"):
            db_state = ensure_database(self.places)
            vhost_state = ensure_vhost(self.places)
            manage(self.env, "migrate", "--noinput")
            manage(self.env, "seed_demo")
            key_out = manage(self.env, "create_producer", "bench").strip().splitlines()
            self.api_key = key_out[-1].strip() if key_out else ""
            if not self.api_key or " " in self.api_key:
                raise BenchError(f"create_producer printed no key: {key_out}")
            # The bench process itself uses the same settings (test Client, queries).
            os.environ.update(self.env)
            import django

            django.setup()
            self.reset_data()
        print(
            f"places: database {self.places.database_name} ({db_state}), "
            f"vhost {self.places.vhost} ({vhost_state}), Redis {self.places.redis_url}"
        )

    def reset_data(self) -> None:
        """Empty the notification tables, the bench's Redis db and its queues."""
        from django.db import connection
        from django_redis import get_redis_connection

        from bench.views import bare_unread_key
        from notify.broker import declare_topology
        from notify.models import Notification

        # Guards: these wipe data, so only ever in the bench's own places.
        if connection.settings_dict["NAME"] != self.places.database_name:
            raise BenchError(f"refusing to empty {connection.settings_dict['NAME']!r}")
        table = connection.ops.quote_name(Notification._meta.db_table)
        with connection.cursor() as cursor:
            cursor.execute(f"TRUNCATE {table} CASCADE")  # outbox, deliveries, feed, ...
        redis = get_redis_connection("default")
        redis_db = int(redis.connection_pool.connection_kwargs.get("db", 0))
        if redis_db != int(self.places.redis_url.rsplit("/", 1)[-1]):
            raise BenchError(f"refusing to flush Redis db {redis_db}")
        redis.flushdb()
        redis.set(bare_unread_key(DEMO_USER), 3)
        declare_topology()
        self.purge_queues()
        self.close_db()

    def purge_queues(self) -> None:
        from notify.celery import app

        with app.connection_for_write() as conn:
            channel = conn.default_channel
            for queue in app.conf.task_queues:
                channel.queue_purge(queue.name)

    @staticmethod
    def close_db() -> None:
        """Give back the bench's own PostgreSQL connections, so the sampler counts only
        the processes being measured."""
        from django.db import connections

        for conn in connections.all():
            conn.close()
            if getattr(conn, "pool", None) is not None:
                conn.close_pool()

    # --- HTTP scenarios ---------------------------------------------------------------------

    def start_web(self) -> tuple[Proc, int]:
        port = free_port()
        web = self.stack.start(
            "web", ["bash", "scripts/web.sh"], {**self.env, "HOST": LOOPBACK, "PORT": str(port)}
        )
        wait_http(f"http://{LOOPBACK}:{port}/healthz", web)
        return web, port

    def wrk(self, port: int, load: Load, connections: int, seconds: float) -> LoadResult:
        return run_wrk(
            self.wrk_path, port, load, connections=connections, seconds=seconds,
            threads=self.config.wrk_threads,
        )  # fmt: skip

    def alternate(
        self, port: int, baseline: Load, subject: Load, connections: int
    ) -> tuple[list[LoadResult], list[LoadResult]]:
        """Warm both up, then baseline/subject alternately, BENCH_RUNS times each."""
        for load in (baseline, subject):
            self.wrk(port, load, connections, self.config.warmup_seconds)
        bases: list[LoadResult] = []
        subjects: list[LoadResult] = []
        for _ in range(self.config.runs):
            bases.append(self.wrk(port, baseline, connections, self.config.seconds))
            subjects.append(self.wrk(port, subject, connections, self.config.seconds))
        return bases, subjects

    def intake_loads(self) -> tuple[Load, Load]:
        bare = Load("POST", "/bench/bare-intake", 202, user_id=DEMO_USER)
        real = Load("POST", "/v1/notifications", 202, api_key=self.api_key, user_id=DEMO_USER)
        return bare, real

    def scenario_s1(self, port: int) -> int:
        c = self.config.connections
        with BackendSampler(self.places) as sampler:
            bases, subjects = self.alternate(port, *self.intake_loads(), connections=c)
        tp = ratio(median_of(subjects, lambda r: r.rps), median_of(bases, lambda r: r.rps))
        p99 = ratio(median_of(subjects, lambda r: r.p99_ms), median_of(bases, lambda r: r.p99_ms))
        print(
            f"S1 intake throughput: {tp:.3g}x bare "
            f"({median_of(subjects, lambda r: r.rps):.0f} vs "
            f"{median_of(bases, lambda r: r.rps):.0f} req/s at {c} connections; "
            f"{verdict(tp, 0.6, at_least=True)})"
        )
        print(
            f"S1 intake p99: {p99:.3g}x bare "
            f"({median_of(subjects, lambda r: r.p99_ms):.1f} vs "
            f"{median_of(bases, lambda r: r.p99_ms):.1f} ms; "
            f"{verdict(p99, 1.5, at_least=False)})"
        )
        self.report_unexpected("S1", subjects + bases, 202)
        return sampler.peak

    def scenario_s5(self, port: int) -> int:
        c = self.config.connections
        bare = Load("GET", f"/bench/bare-unread/{DEMO_USER}", 200)
        real = Load("GET", f"/v1/users/{DEMO_USER}/unread-count", 200, api_key=self.api_key)
        with BackendSampler(self.places) as sampler:
            bases, subjects = self.alternate(port, bare, real, connections=c)
        tp = ratio(median_of(subjects, lambda r: r.rps), median_of(bases, lambda r: r.rps))
        print(
            f"S5 unread count throughput: {tp:.3g}x bare "
            f"({median_of(subjects, lambda r: r.rps):.0f} vs "
            f"{median_of(bases, lambda r: r.rps):.0f} req/s at {c} connections; "
            f"p99 {median_of(subjects, lambda r: r.p99_ms):.1f} vs "
            f"{median_of(bases, lambda r: r.p99_ms):.1f} ms; "
            f"{verdict(tp, 0.5, at_least=True)})"
        )
        self.report_unexpected("S5", subjects + bases, 200)
        return sampler.peak

    def scenario_load(self, port: int, budget_web: int, budget_all: int, limit: int) -> None:
        c, seconds = self.config.load_connections, self.config.load_seconds
        bare, real = self.intake_loads()
        with BackendSampler(self.places) as sampler:
            subject = self.wrk(port, real, c, seconds)
        base = self.wrk(port, bare, c, seconds)
        p99 = ratio(subject.p99_ms, base.p99_ms)
        print(
            f"load {c} clients {seconds:.0f} s: non-202 answers {subject.unexpected} of "
            f"{subject.requests} (socket errors {subject.socket_errors}; must be 0); "
            f"{subject.rps:.0f} req/s"
        )
        print(
            f"load {c} clients: peak PostgreSQL backends {sampler.peak} "
            f"(budget: web {budget_web}, whole Procfile {budget_all}, "
            f"max_connections {limit}; {'within' if sampler.peak <= budget_web else 'OVER'} "
            "the web budget)"
        )
        print(
            f"load {c} clients: p99 {p99:.3g}x bare ({subject.p99_ms:.1f} vs "
            f"{base.p99_ms:.1f} ms, max {subject.max_ms:.0f} ms; "
            f"{verdict(p99, 2.0, at_least=False)})"
        )
        if base.unexpected or base.socket_errors:
            print(f"load: the bare view failed {base.unexpected + base.socket_errors} requests")

    @staticmethod
    def report_unexpected(name: str, results: list[LoadResult], status: int) -> None:
        bad = sum(r.unexpected + r.socket_errors for r in results)
        if bad:
            total = sum(r.requests for r in results)
            print(f"{name}: WARNING {bad} of {total} requests did not answer {status}")

    def http_scenarios(self) -> None:
        wanted = [name for name in ("s1", "s5", "load") if name in self.config.only]
        if not wanted:
            return
        web_processes = env_int("WEB_CONCURRENCY", 2)
        worker_pool = env_int("DATABASE_POOL_MAX_SIZE", env_int("WORKER_CONCURRENCY", 8) + 2)
        budget_web = web_processes * env_int("DATABASE_POOL_MAX_SIZE", WEB_POOL_DEFAULT)
        # beat and relay pools, plus the relay's LISTEN connection (outside its pool).
        budget_all = budget_web + 3 * worker_pool + 2 * SMALL_POOL_DEFAULT + 1
        limit = max_connections(self.places)
        with phase("starting scripts/web.sh"):
            web, port = self.start_web()
        print(f"web: scripts/web.sh, WEB_CONCURRENCY={web_processes}, DEBUG off, port {port}")
        peaks: list[int] = []
        try:
            if "s1" in wanted:
                with phase("S1 intake"):
                    peaks.append(self.guard("S1", lambda: self.scenario_s1(port)) or 0)
            if "s5" in wanted:
                with phase("S5 unread count"):
                    peaks.append(self.guard("S5", lambda: self.scenario_s5(port)) or 0)
            if peaks:
                print(
                    f"S1/S5 peak PostgreSQL backends: {max(peaks)} "
                    f"(web budget {web_processes} x pool max = {budget_web})"
                )
            if "load" in wanted:
                with phase(f"load: {self.config.load_connections} clients"):
                    self.guard(
                        "load", lambda: self.scenario_load(port, budget_web, budget_all, limit)
                    )
        finally:
            self.stack.stop(web)

    # --- S2: the pipeline -------------------------------------------------------------------

    def scenario_s2(self) -> None:
        from django.core.management import get_commands

        n = self.config.events
        sink_port = free_port()
        sink = self.stack.start(
            "smtp-sink",
            [python(), "-m", "aiosmtpd", "-n", "-c", "aiosmtpd.handlers.Sink",
             "-l", f"{LOOPBACK}:{sink_port}"],
            self.env,
        )  # fmt: skip
        wait_port(sink_port, sink)
        worker_env = {**self.env, "EMAIL_HOST": LOOPBACK, "EMAIL_PORT": str(sink_port)}
        has_relay = "outbox_relay" in get_commands()
        noops: list[Drain] = []
        pipelines: list[Drain] = []
        intake_sql: float | None = None
        for run in range(self.config.runs):
            noops.append(self.noop_run(worker_env, n))
            drain, sql_intake = self.pipeline_run(worker_env, n, has_relay, count_intake=run == 0)
            pipelines.append(drain)
            intake_sql = sql_intake if sql_intake is not None else intake_sql
        self.stack.stop(sink)

        pipe_rate = statistics.median(d.rate for d in pipelines)
        noop_rate = statistics.median(d.rate for d in noops)
        value = ratio(pipe_rate, noop_rate)
        relay_note = "worker + outbox_relay" if has_relay else "worker alone (no outbox_relay yet)"
        print(
            f"S2 pipeline: {value:.3g}x no-op ({pipe_rate:.0f} events/s, inapp + email to an "
            f"SMTP sink, vs {noop_rate:.0f} no-op tasks/s; {n} each, timed from worker start; "
            f"{relay_note}; {verdict(value, 0.12, at_least=True)})"
        )
        # The no-op run is short, so the worker's start-up weighs more on it: the same
        # figure without it shows the steady drain rates.
        if all(d.drain_rate for d in pipelines + noops):
            pipe_drain = statistics.median(d.drain_rate or 0 for d in pipelines)
            noop_drain = statistics.median(d.drain_rate or 0 for d in noops)
            print(
                f"S2 pipeline after worker start-up: {ratio(pipe_drain, noop_drain):.3g}x "
                f"({pipe_drain:.0f} events/s vs {noop_drain:.0f} tasks/s; start-up "
                f"{statistics.median(d.startup or 0 for d in pipelines):.1f} s and "
                f"{statistics.median(d.startup or 0 for d in noops):.1f} s)"
            )
        parts = []
        if intake_sql is not None:
            parts.append(f"intake {intake_sql:.1f} (in-process API)")
        counted = [d.statements / n for d in pipelines if d.statements]
        if counted:
            parts.append(
                f"worker{' + relay' if has_relay else ''} {statistics.median(counted):.1f}"
            )
        if parts:
            print(f"S2 SQL statements per event: {', '.join(parts)}")
        worker_pool = env_int("DATABASE_POOL_MAX_SIZE", env_int("WORKER_CONCURRENCY", 8) + 2)
        budget = worker_pool + (SMALL_POOL_DEFAULT + 1 if has_relay else 0)
        print(
            f"S2 peak PostgreSQL backends: {max(d.peak_backends for d in pipelines)} (budget "
            f"{budget}: worker pool {worker_pool}"
            + (f" + relay pool {SMALL_POOL_DEFAULT} + its LISTEN connection" if has_relay else "")
            + "; the bench's own progress query adds 1)"
        )

    def ready_at(self, key: str) -> float | None:
        """When the worker said it was ready (bench.apps writes it), as time.time()."""
        from django_redis import get_redis_connection

        raw = get_redis_connection("default").get(key)
        return float(raw) if raw else None

    def noop_run(self, worker_env: dict[str, str], n: int) -> Drain:
        """n no-op tasks queued first, then the worker started and timed until the queue
        is empty (the last few in flight finish within a millisecond)."""
        from bench.tasks import NOOP_TASK
        from notify.celery import app

        self.purge_queues()
        with app.producer_or_acquire() as producer:
            for _ in range(n):
                app.send_task(
                    NOOP_TASK, queue="medium", routing_key="medium", exchange="notify",
                    priority=5, producer=producer,
                )  # fmt: skip
        ready_key = f"bench:ready:{time.time_ns()}"
        env = {**worker_env, "BENCH_READY_KEY": ready_key}
        started = time.time()
        worker = self.stack.start("worker-noop", ["bash", "scripts/worker.sh", "medium"], env)
        try:
            with app.connection_for_read() as conn:
                channel = conn.default_channel
                deadline = time.monotonic() + self.config.pipeline_timeout
                while True:
                    _, ready, _ = channel.queue_declare(queue="medium", passive=True)
                    if ready == 0:
                        break
                    if time.monotonic() > deadline:
                        raise BenchError(f"no-op: {ready} of {n} tasks left after the timeout")
                    worker.check()
                    time.sleep(0.01)
            finished = time.time()
        finally:
            self.stack.stop(worker)
        return Drain(n, started, finished, self.ready_at(ready_key))

    def pipeline_run(
        self, worker_env: dict[str, str], n: int, has_relay: bool, *, count_intake: bool
    ) -> tuple[Drain, float | None]:
        """Preload n events through the API in-process (worker stopped), then time the
        worker (and relay) from start until every delivery is final. Also returns the
        intake's SQL statements per event when asked to count them."""
        from django.db import connection
        from django.test import Client
        from django.test.utils import CaptureQueriesContext
        from django_redis import get_redis_connection

        self.reset_data()
        client = Client(HTTP_AUTHORIZATION=f"Bearer {self.api_key}")
        stamp = f"s2-{os.getpid()}-{time.time_ns()}"
        counted = min(n, 100) if count_intake else 0
        intake_sql: float | None = None
        with CaptureQueriesContext(connection) as captured:
            for number in range(counted):
                self.post_event(client, stamp, number)
        if counted:
            intake_sql = len(captured.captured_queries) / counted
        for number in range(counted, n):
            self.post_event(client, stamp, number)
        self.close_db()

        sql_key, ready_key = f"bench:sql:{stamp}", f"bench:ready:{stamp}"
        env = {
            **worker_env,
            "BENCH_COUNT_SQL": "1",
            "BENCH_SQL_KEY": sql_key,
            "BENCH_READY_KEY": ready_key,
        }
        started = time.time()
        procs = [self.stack.start("worker-pipeline", ["bash", "scripts/worker.sh", "medium"], env)]
        if has_relay:
            procs.append(
                self.stack.start("relay", ["bash", "scripts/manage.sh", "outbox_relay"], env)
            )
        try:
            with BackendSampler(self.places) as sampler:
                self.wait_final(n, procs)
                finished = time.time()
        finally:
            for proc in procs:
                self.stack.stop(proc)  # a warm shutdown: the SQL count is written at exit
            self.close_db()
        statements = int(get_redis_connection("default").get(sql_key) or 0)
        drain = Drain(n, started, finished, self.ready_at(ready_key), statements, sampler.peak)
        return drain, intake_sql

    def post_event(self, client: Client, stamp: str, number: int) -> None:
        response = client.post(
            "/v1/notifications",
            {
                "event_id": f"{stamp}-{number}",
                "user_id": DEMO_USER,
                "category": "order.shipped",
                "channels": ["inapp", "email"],
                "payload": {"order_number": f"S-{number}", "delivery_date": "2026-12-03",
                            "items_count": 1},
            },
            content_type="application/json",
        )  # fmt: skip
        if response.status_code != 202:
            raise BenchError(f"preload POST answered {response.status_code}: {response.content!r}")

    def wait_final(self, n: int, procs: list[Proc]) -> None:
        """Return once every notification has deliveries and all of them are final.

        Fails early when a task was dead-lettered (it raised: see the worker's log) or
        nothing moved for BENCH_STALL_SECONDS, instead of waiting out the timeout.
        """
        from django.db.models import Exists, OuterRef

        from deliveries.models import FINAL_STATUSES, Delivery
        from notify.celery import app
        from notify.models import Notification

        of_it = Delivery.objects.filter(notification=OuterRef("pk"))
        pending = Notification.objects.filter(
            ~Exists(of_it) | Exists(of_it.exclude(status__in=FINAL_STATUSES))
        )
        deadline = time.monotonic() + self.config.pipeline_timeout
        stall = env_float("BENCH_STALL_SECONDS", 60.0)
        last_left, last_change = n, time.monotonic()
        with app.connection_for_read() as conn:
            channel = conn.default_channel
            while True:
                left = pending.count()
                now = time.monotonic()
                if left == 0:
                    break
                if left != last_left:
                    last_left, last_change = left, now
                _, dead, _ = channel.queue_declare(queue="dead_letter", passive=True)
                problem = ""
                if dead:
                    problem = f"{dead} task(s) dead-lettered (they raised)"
                elif now - last_change > stall:
                    problem = f"no progress for {stall:.0f} s"
                elif now > deadline:
                    problem = f"not done after {self.config.pipeline_timeout:.0f} s"
                if problem:
                    raise BenchError(
                        f"{problem}; {left} of {n} notifications not final; deliveries "
                        f"{self.status_summary()}; end of {procs[0].log_path}:\n"
                        f"{procs[0].tail(8)}"
                    )
                for proc in procs:
                    proc.check()
                time.sleep(0.1)
        summary = self.status_summary()
        if set(summary) - {"delivered"}:
            print(f"S2: WARNING not every delivery was delivered: {summary}")

    @staticmethod
    def status_summary() -> dict[str, int]:
        from django.db.models import Count

        from deliveries.models import Delivery

        rows = Delivery.objects.values("status").annotate(n=Count("id")).order_by("status")
        return {row["status"]: row["n"] for row in rows}

    # --- Running ----------------------------------------------------------------------------

    def guard(self, name: str, step: Callable[[], int | None]) -> int | None:
        """Run one scenario; a failure is printed and remembered, the others still run."""
        try:
            return step()
        except BenchError as error:
            self.failed.append(name)
            print(f"{name}: FAILED: {error}")
            return None

    def run(self) -> int:
        self.prepare()
        self.http_scenarios()
        if "s2" in self.config.only:
            with phase(f"S2 pipeline: {self.config.events} events"):
                self.guard("S2", self.scenario_s2)
        if self.failed:
            print(f"failed: {', '.join(self.failed)} (process logs in var/bench/)")
            return 1
        return 0


def main() -> int:
    print(machine_line(), flush=True)
    # whitenoise warns that collectstatic never ran for the bench; nothing is served.
    warnings.filterwarnings("ignore", message="No directory at")
    started = time.perf_counter()
    try:
        config = Config.from_environment()
        wrk = ensure_wrk()
        with Stack() as stack:
            code = Bench(config, Places.from_environment(), stack, wrk).run()
    except BenchError as error:
        print(f"bench: {error}", file=sys.stderr)
        return 1
    print(f"bench took {time.perf_counter() - started:.0f} s")
    return code


if __name__ == "__main__":
    raise SystemExit(main())
