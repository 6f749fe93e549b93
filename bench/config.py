"""The bench's knobs (BENCH_* variables), its constants and its one error type.

Everything else in the package builds on this module; it imports nothing of the bench.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LOOPBACK = "127.0.0.1"
DEMO_USER = "demo-user"
SCENARIOS = ("s1", "s5", "load", "s2", "s3", "s4", "s6")

# The defaults of scripts/web.sh, scripts/worker.sh, beat.sh and manage.sh, for the
# budget printed next to the measured peak (docs/connections.md works it out).
WEB_POOL_DEFAULT = 10
SMALL_POOL_DEFAULT = 2  # beat and the relay (scripts/beat.sh, scripts/manage.sh)


class BenchError(RuntimeError):
    """A step of the bench could not be done; the message says which and why."""


def env_int(name: str, default: int) -> int:
    """The whole number in environment variable `name`, or `default` when unset or empty."""
    raw = os.environ.get(name, "")
    try:
        return int(raw) if raw else default
    except ValueError:
        raise BenchError(f"{name} must be a whole number, not {raw!r}") from None


def env_float(name: str, default: float) -> float:
    """The number in environment variable `name`, or `default` when unset or empty."""
    raw = os.environ.get(name, "")
    try:
        return float(raw) if raw else default
    except ValueError:
        raise BenchError(f"{name} must be a number, not {raw!r}") from None


@dataclass(frozen=True)
class Config:
    """Every knob, from BENCH_* variables; the defaults keep `make bench` near 7 minutes."""

    runs: int
    seconds: float
    warmup_seconds: float
    connections: int
    load_connections: int
    load_seconds: float
    events: int
    event_recipients: int
    pipeline_timeout: float
    wrk_threads: int
    smtp_rate: str
    campaign_recipients: int
    campaign_drain: int
    login_codes: int
    code_recipients: int
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
            event_recipients=max(1, env_int("BENCH_S2_RECIPIENTS", 100)),
            pipeline_timeout=env_float("BENCH_PIPELINE_TIMEOUT", 240.0),
            wrk_threads=max(1, env_int("BENCH_WRK_THREADS", 1)),
            smtp_rate=os.environ.get("BENCH_SMTP_RATE", "1000000:1000000"),
            campaign_recipients=max(1, env_int("BENCH_CAMPAIGN_RECIPIENTS", 20000)),
            campaign_drain=max(1, env_int("BENCH_CAMPAIGN_DRAIN", 3000)),
            login_codes=max(1, env_int("BENCH_LOGIN_CODES", 200)),
            # S3's codes go round robin to this many people (0: one each). Per-recipient
            # order sends one person's emails one at a time, so 1 is the worst case.
            code_recipients=env_int("BENCH_S3_RECIPIENTS", 0),
            only=only,
        )
