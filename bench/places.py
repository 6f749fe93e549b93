"""Isolated places for the bench: its own PostgreSQL database, RabbitMQ vhost and Redis
database, never the dev stack's or the tests'; and a sampler of the database's backends.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from urllib.parse import urlsplit, urlunsplit

import psycopg
from psycopg import sql

from bench.config import BenchError, env_int


def _with_path(url: str, path: str) -> str:
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc, path, parts.query, parts.fragment))


@dataclass(frozen=True)
class Places:
    """Where the bench's processes keep their data: never the dev stack's or the tests'."""

    database_url: str
    database_name: str
    broker_url: str
    vhost: str
    redis_url: str

    @classmethod
    def from_environment(cls) -> Places:
        """The configured services (same defaults as the settings), with the bench's own
        database (BENCH_DATABASE), vhost (BENCH_VHOST) and Redis db (BENCH_REDIS_DB)."""
        database = os.environ.get("BENCH_DATABASE", "notify_bench")
        vhost = os.environ.get("BENCH_VHOST", "notify_bench")
        redis_db = env_int("BENCH_REDIS_DB", 14)
        base_db = os.environ.get("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/notify")
        base_broker = os.environ.get("CELERY_BROKER_URL", "amqp://guest:guest@127.0.0.1:5672//")
        base_redis = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0")
        return cls(
            database_url=_with_path(base_db, f"/{database}"),
            database_name=database,
            broker_url=_with_path(base_broker, f"/{vhost}"),
            vhost=vhost,
            redis_url=_with_path(base_redis, f"/{redis_db}"),
        )

    def maintenance_url(self) -> str:
        return _with_path(self.database_url, "/postgres")

    def environment(self) -> dict[str, str]:
        return {
            "DATABASE_URL": self.database_url,
            "CELERY_BROKER_URL": self.broker_url,
            "REDIS_URL": self.redis_url,
        }


def ensure_database(places: Places) -> str:
    """Create the bench database if it is missing; returns 'exists' or 'created'."""
    with psycopg.connect(places.maintenance_url(), autocommit=True, connect_timeout=5) as conn:
        found = conn.execute(
            "SELECT 1 FROM pg_database WHERE datname = %s", (places.database_name,)
        ).fetchone()
        if found:
            return "exists"
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(places.database_name)))
    return "created"


def max_connections(places: Places) -> int:
    """PostgreSQL's max_connections, printed next to the measured peak of backends."""
    with psycopg.connect(places.maintenance_url(), autocommit=True, connect_timeout=5) as conn:
        row = conn.execute("SHOW max_connections").fetchone()
    return int(row[0]) if row else 0


def ensure_vhost(places: Places) -> str:
    """Create the bench vhost with full permissions for the broker user, if missing.

    Needs a local rabbitmqctl; with a remote broker the vhost must already exist.
    """
    host = urlsplit(places.broker_url).hostname or ""
    user = urlsplit(places.broker_url).username or "guest"
    rabbitmqctl = shutil.which("rabbitmqctl")
    if host not in ("127.0.0.1", "localhost", "::1") or rabbitmqctl is None:
        return "not checked (no local rabbitmqctl); it must exist"
    listed = _run([rabbitmqctl, "-s", "list_vhosts", "name"]).split()
    state = "exists"
    if places.vhost not in listed:
        _run([rabbitmqctl, "-q", "add_vhost", places.vhost])
        state = "created"
    _run([rabbitmqctl, "-q", "set_permissions", "-p", places.vhost, user, ".*", ".*", ".*"])
    return state


def _run(argv: Sequence[str]) -> str:
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
    if done.returncode != 0:
        raise BenchError(f"{' '.join(argv)} failed: {done.stderr.strip() or done.stdout.strip()}")
    return done.stdout


class BackendSampler:
    """Samples how many backends serve the bench database, every `interval` seconds,
    from its own connection (not counted), and keeps the peak. `app`: only the backends
    of that bench process (its application_name, e.g. "bench:web")."""

    def __init__(self, places: Places, interval: float = 0.05, app: str | None = None) -> None:
        self._places = places
        self._app = app
        self._interval = interval
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.peak = 0
        self.error: str | None = None

    def __enter__(self) -> BackendSampler:
        self._stop.clear()
        self._thread = threading.Thread(target=self._sample, name="backend-sampler", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def _sample(self) -> None:
        try:
            with psycopg.connect(
                self._places.maintenance_url(), autocommit=True, connect_timeout=5
            ) as conn:
                while not self._stop.is_set():
                    row = conn.execute(
                        "SELECT count(*) FROM pg_stat_activity"
                        " WHERE datname = %s AND pid <> pg_backend_pid()"
                        " AND (%s::text IS NULL OR application_name = %s::text)",
                        (self._places.database_name, self._app, self._app),
                    ).fetchone()
                    self.peak = max(self.peak, int(row[0]) if row else 0)
                    self._stop.wait(self._interval)
        except psycopg.Error as error:
            self.error = str(error)
