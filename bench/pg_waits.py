"""What some processes' PostgreSQL backends are doing, sampled from pg_stat_activity.

S3 (BENCH_S3_WAITS=1) samples the backends that serve a login code (the bench's own
intake, the high worker, the high relay) while its codes go, idle and during the
campaign: each sample of a backend running a statement counts as `CPU` when it waits
for nothing, else as its wait event (`IO:WALSync`, `LWLock:WALWrite`, `Lock:extend`, …).
A backend idle, or idle in a transaction waiting for its client, is not counted: that
time is the client's. The sampler is a thread with its own connection, at the usual
priority; it costs a query per interval, so it is opt-in and its runs are not the
figures of record.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Sequence
from types import TracebackType

import psycopg

SAMPLER_APP = "bench-waits"  # the sampler's own application_name
INTERVAL = 0.005  # seconds between two samples


class WaitSampler:
    """Counts, until the `with` block ends, what the backends of `apps` (their
    application_name) are doing while they run a statement."""

    def __init__(self, apps: Sequence[str], *, interval: float = INTERVAL) -> None:
        self.apps = list(apps)
        self.interval = interval
        self.counts: Counter[str] = Counter()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> WaitSampler:
        from django.db import connection

        params = connection.get_connection_params()
        for key in ("cursor_factory", "context", "prepare_threshold"):
            params.pop(key, None)
        params["application_name"] = SAMPLER_APP
        conn = psycopg.connect(**params, autocommit=True)
        self._thread = threading.Thread(target=self._run, args=(conn,), daemon=True)
        self._thread.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    def _run(self, conn: psycopg.Connection) -> None:
        with conn:
            while not self._stop.wait(self.interval):
                rows = conn.execute(
                    "SELECT wait_event_type, wait_event FROM pg_stat_activity"
                    " WHERE state = 'active' AND application_name = ANY(%s)",
                    [self.apps],
                ).fetchall()
                self.counts.update(f"{kind}:{event}" if kind else "CPU" for kind, event in rows)


def waits_text(counts: Counter[str], *, top: int = 6) -> str:
    """The most frequent states as shares of all samples: 'CPU 52 %, IO:WALSync 31 %, …'."""
    total = sum(counts.values())
    if not total:
        return "no samples"
    return (
        ", ".join(f"{name} {100 * n / total:.0f} %" for name, n in counts.most_common(top))
        + f" ({total} samples)"
    )
