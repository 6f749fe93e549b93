"""One `make bench` run: the `Bench` every scenario is handed, and its preparation.

`Bench` holds what the scenarios share (the knobs, the places, the process stack, the
API key, the failures so far) and prepares the places; the scenarios themselves live in
bench/web_scenarios.py (S1, S5, load), bench/pipeline.py (S2), bench/login_codes.py (S3),
bench/campaign_fanout.py (S4), bench/metrics_scrape.py (S6), bench/campaign_drain.py
(S7), bench/push_drain.py (S10), bench/sms_drain.py (S11) and bench/broker_cluster.py
(cluster).
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable

from bench.analytics_ship import scenario_s12
from bench.broker_cluster import scenario_cluster
from bench.campaign_drain import scenario_s7
from bench.campaign_fanout import scenario_s4
from bench.channel_isolation import scenario_s8
from bench.config import DEMO_USER, ROOT, BenchError, Config
from bench.costs import BENCH_APP
from bench.digests import scenario_s2d
from bench.live_stream import scenario_stream
from bench.login_codes import scenario_s3
from bench.metrics_scrape import scenario_s6
from bench.outside import scenario_s2o
from bench.pipeline import scenario_s2
from bench.places import Places, ensure_database, ensure_vhost
from bench.processes import Stack
from bench.push_drain import scenario_s10
from bench.report import phase
from bench.sms_drain import scenario_s11
from bench.web_scenarios import http_scenarios
from bench.webhook_backlog import scenario_s9
from bench.wrk import Load, LoadResult, run_wrk

BENCH_KEY_SCOPES = "notifications:send,users:read,campaigns:write"


def child_environment(places: Places, config: Config) -> dict[str, str]:
    """The environment of every process the bench starts (and of the bench itself)."""
    env = dict(os.environ)
    for name in ("HOST", "PORT", "BENCH_COUNT_KEY", "BENCH_READY_KEY"):
        env.pop(name, None)
    env.update(places.environment())
    env.update(
        {
            "DJANGO_SETTINGS_MODULE": "bench.settings",
            "DJANGO_DEBUG": "0",
            # With DEBUG off the web process refuses a short or built-in key.
            "DJANGO_SECRET_KEY": env.get(
                "DJANGO_SECRET_KEY", "bench-only-secret-key-0123456789-abcdefghijklmnopqrstuvwxyz"
            ),
            # And every process refuses the built-in erasure key.
            "NOTIFY_ERASURE_KEY": env.get(
                "NOTIFY_ERASURE_KEY", "bench-only-erasure-key-0123456789-abcdefghijklmnopqrstuvwxyz"
            ),
            "DJANGO_ALLOWED_HOSTS": "127.0.0.1,localhost,testserver",
            "PYTHONUNBUFFERED": "1",
            # The bench's own backends, left out of the PostgreSQL CPU it measures
            # (bench.costs); each process it starts gets its own name (bench.processes).
            "PGAPPNAME": BENCH_APP,
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
        """Create and migrate the places, seed them, make an API key, set up Django."""
        with phase("preparing the bench database, vhost and Redis db"):
            db_state = ensure_database(self.places)
            vhost_state = ensure_vhost(self.places)
            manage(self.env, "migrate", "--noinput")
            manage(self.env, "seed_demo")
            # The scopes the scenarios use: intake, the unread count and stream, campaigns.
            key_out = (
                manage(self.env, "create_producer", "bench", "--scopes", BENCH_KEY_SCOPES)
                .strip()
                .splitlines()
            )
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

        from analytics.models import AnalyticsEvent
        from bench.views import bare_unread_key
        from deliveries.models import Delivery, DeliveryAttempt, DigestItem, DigestWindow
        from notify.broker import declare_topology
        from notify.models import EventKey, FeedEntry, Notification, Outbox

        # Guards: these wipe data, so only ever in the bench's own places.
        if connection.settings_dict["NAME"] != self.places.database_name:
            raise BenchError(f"refusing to empty {connection.settings_dict['NAME']!r}")
        # History has no database foreign keys into its partitioned tables, so CASCADE
        # does not reach them: every table of the pipeline is named.
        models = [
            Notification,
            EventKey,
            Outbox,
            FeedEntry,
            Delivery,
            DeliveryAttempt,
            DigestItem,
            DigestWindow,
            AnalyticsEvent,
        ]
        tables = ", ".join(connection.ops.quote_name(m._meta.db_table) for m in models)
        with connection.cursor() as cursor:
            cursor.execute(f"TRUNCATE {tables} CASCADE")
        redis = get_redis_connection("default")
        redis_db = int(redis.connection_pool.connection_kwargs.get("db", 0))
        if redis_db != int(self.places.redis_url.rsplit("/", 1)[-1]):
            raise BenchError(f"refusing to flush Redis db {redis_db}")
        redis.flushdb()
        redis.set(bare_unread_key(DEMO_USER), 3)
        declare_topology()
        self.purge_queues()
        self.close_db()

    def purge_queues(self, broker_url: str | None = None) -> None:
        """Empty every queue of the bench's vhost (or of the broker at `broker_url`)."""
        from config.celery import app

        with app.connection_for_write(url=broker_url) as conn:
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

    # --- What the HTTP scenarios share (and bench/servers.py) -------------------------------

    def wrk(self, port: int, load: Load, connections: int, seconds: float) -> LoadResult:
        """One wrk run with the bench's wrk and BENCH_WRK_THREADS."""
        return run_wrk(
            self.wrk_path,
            port,
            load,
            connections=connections,
            seconds=seconds,
            threads=self.config.wrk_threads,
        )

    def intake_loads(self) -> tuple[Load, Load]:
        """POSTs of one notification: to the bare baseline view, and to the real API."""
        bare = Load("POST", "/bench/bare-intake", 202, user_id=DEMO_USER)
        real = Load("POST", "/v1/notifications", 202, api_key=self.api_key, user_id=DEMO_USER)
        return bare, real

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
        """Prepare, run the scenarios BENCH_ONLY picks; 1 if any of them failed."""
        self.prepare()
        http_scenarios(self)
        if "stream" in self.config.only:
            with phase("stream: open SSE streams on one host"):
                self.guard("stream", lambda: scenario_stream(self))
        if "s2" in self.config.only:
            with phase(f"S2 pipeline: {self.config.events} events"):
                self.guard("S2", lambda: scenario_s2(self))
        if "s2o" in self.config.only:
            with phase("S2o pipeline from outside: every Procfile process but web"):
                self.guard("S2o", lambda: scenario_s2o(self))
        if "s2d" in self.config.only:
            with phase(f"S2d digest path: {self.config.events} events, beside S2's"):
                self.guard("S2d", lambda: scenario_s2d(self))
        if "s3" in self.config.only:
            with phase(
                f"S3 login codes: {self.config.login_codes}, idle and during a campaign to "
                f"{self.config.campaign_drain}"
            ):
                self.guard("S3", lambda: scenario_s3(self))
        if "s4" in self.config.only:
            with phase(f"S4 campaign fan-out: {self.config.campaign_recipients} recipients"):
                self.guard("S4", lambda: scenario_s4(self))
        if "s6" in self.config.only:
            with phase("S6 metrics scrape: 10,000 then 1,000,000 deliveries"):
                self.guard("S6", lambda: scenario_s6(self))
        if "s7" in self.config.only:
            large = f", then {self.config.s7_large}" if self.config.s7_large else ""
            with phase(
                f"S7 campaign drain: {self.config.s7_runs} x {self.config.s7_recipients} "
                f"recipients{large}"
            ):
                self.guard("S7", lambda: scenario_s7(self))
        if "s8" in self.config.only:
            with phase("S8 login codes by SMS and push beside a slow SMTP relay"):
                self.guard("S8", lambda: scenario_s8(self))
        if "s9" in self.config.only:
            with phase(
                f"S9 login codes: {self.config.login_codes}, idle and beside a backlog "
                "of status webhook events"
            ):
                self.guard("S9", lambda: scenario_s9(self))
        if "s10" in self.config.only:
            with phase("S10 push drain: Web Push and FCM, the worker vs a bare client"):
                self.guard("S10", lambda: scenario_s10(self))
        if "s11" in self.config.only:
            with phase("S11 SMS drain: the worker vs a bare windowed SMPP client"):
                self.guard("S11", lambda: scenario_s11(self))
        if "s12" in self.config.only:
            with phase("S12 analytics: shipping vs a bare bulk insert, reports over many events"):
                self.guard("S12", lambda: scenario_s12(self))
        if "cluster" in self.config.only:
            with phase(
                f"cluster: 3 RabbitMQ nodes vs the single node, {self.config.events} events"
            ):
                self.guard("cluster", lambda: scenario_cluster(self))
        if self.failed:
            print(f"failed: {', '.join(self.failed)} (process logs in var/bench/)")
            return 1
        return 0
