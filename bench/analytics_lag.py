"""How far the analytics store is behind while S7's campaign drains.

S7 starts the Procfile's `analytics` process beside the workers and relays (as deployed:
BENCH_S7_PROCESSES), with a store of its own under var/bench/. While the campaign runs,
a thread reads the age of the oldest event still queued in PostgreSQL every
LAG_INTERVAL — what `/metrics` reports as `notify_analytics_lag_seconds` — over its own
connection; after every delivery is final it waits for the queue to empty, so the line
also says how long after the drain the store had every event.
"""

from __future__ import annotations

import shutil
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import psycopg

from bench.config import ROOT

LAG_INTERVAL = 0.25  # seconds between two readings of the queue's oldest event
DRAINED_TIMEOUT = 120.0  # the longest the queue is waited for after the drain
# The S7 and S2 stores: the analytics process's own, emptied at each run's start.
STORE_DIR = ROOT / "var" / "bench" / "analytics-s7"
S2_STORE_DIR = ROOT / "var" / "bench" / "analytics-s2"
S3_STORE_DIR = ROOT / "var" / "bench" / "analytics-s3"
# What a run with analytics off changes in every process it starts (and the bench's own
# settings while it posts or launches): no events written, and no shipper started.
ANALYTICS_OFF = {"NOTIFY_ANALYTICS_ENABLED": "0"}
_OLDEST_AGE = (
    "SELECT extract(epoch FROM clock_timestamp() - occurred_at)"
    " FROM analytics_analyticsevent ORDER BY id LIMIT 1"
)


@dataclass(frozen=True)
class StoreLag:
    """The store's lag over one drain: its largest reading, and how long after every
    delivery was final the queue was empty (None: not within DRAINED_TIMEOUT)."""

    max_seconds: float
    drained_after: float | None
    readings: int


def queue_shipped() -> bool:
    """The shipper has shipped every queued event (a warm-up's): it is up and steady, so
    its start-up (the embedded engine's load) is not inside what the bench times next."""
    from analytics.models import AnalyticsEvent

    return not AnalyticsEvent.objects.exists()


def store_env(directory: Path = STORE_DIR) -> dict[str, str]:
    """The analytics process's environment for one run: a fresh store of its own, and
    no reader (nothing asks it for reports here)."""
    shutil.rmtree(directory, ignore_errors=True)
    Path(directory).mkdir(parents=True)
    return {"NOTIFY_ANALYTICS_DATA_DIR": str(directory), "NOTIFY_ANALYTICS_READER_ADDRESS": ""}


class LagWatch:
    """Reads the queue's oldest event's age in a thread until `finish` is called."""

    def __init__(self, database_url: str) -> None:
        self._url = database_url
        self._stop = threading.Event()
        self._max = 0.0
        self._readings = 0
        self._thread = threading.Thread(target=self._watch, name="s7-analytics-lag", daemon=True)

    def __enter__(self) -> LagWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _watch(self) -> None:
        with psycopg.connect(self._url, autocommit=True) as conn:
            while not self._stop.is_set():
                row = conn.execute(_OLDEST_AGE).fetchone()
                self._max = max(self._max, float(row[0]) if row else 0.0)
                self._readings += 1
                self._stop.wait(LAG_INTERVAL)

    def finish(self) -> StoreLag:
        """Every delivery is final now: wait for the queue to empty, stop reading."""
        final = time.monotonic()
        drained_after = None
        with psycopg.connect(self._url, autocommit=True) as conn:
            while time.monotonic() - final < DRAINED_TIMEOUT:
                if conn.execute(_OLDEST_AGE).fetchone() is None:
                    drained_after = time.monotonic() - final
                    break
                time.sleep(LAG_INTERVAL)
        self._stop.set()
        self._thread.join()
        return StoreLag(self._max, drained_after, self._readings)
