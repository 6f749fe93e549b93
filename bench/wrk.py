"""HTTP load with wrk: what to send (`Load`), one closed-loop run, and its figures.

bench/load.lua does the sending and counting inside wrk and prints one BENCH_RESULT
line of JSON, which `run_wrk` parses.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from bench.config import LOOPBACK, BenchError

WRK_SCRIPT = Path(__file__).resolve().parent / "load.lua"


def ensure_wrk() -> str:
    """The path of wrk, installing Debian's package once if it is missing."""
    found = shutil.which("wrk")
    if found:
        return found
    apt = shutil.which("apt-get")
    if apt is None or os.geteuid() != 0:
        raise BenchError("wrk is not installed; install it (Debian: apt-get install -y wrk)")
    print("bench: installing wrk (apt-get install -y wrk)", flush=True)
    for argv in ([apt, "update", "-qq"], [apt, "install", "-y", "-qq", "wrk"]):
        done = subprocess.run(
            argv,
            capture_output=True,
            text=True,
            check=False,
            env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"},
        )
        if done.returncode != 0:
            raise BenchError(f"{' '.join(argv)} failed:\n{done.stdout}{done.stderr}")
    found = shutil.which("wrk")
    if not found:
        raise BenchError("wrk is still missing after apt-get install")
    return found


@dataclass(frozen=True)
class LoadResult:
    """One wrk run. `unexpected` counts answers with another status than expected;
    `socket_errors` requests that got no answer at all (connect, read, write, timeout)."""

    requests: int
    seconds: float
    p50_ms: float
    p99_ms: float
    max_ms: float
    unexpected: int
    socket_errors: int

    @property
    def rps(self) -> float:
        return self.requests / self.seconds if self.seconds else 0.0


@dataclass(frozen=True)
class Load:
    """What to send: method, path, the status every answer must have, and the headers."""

    method: str
    path: str
    expect: int
    api_key: str = ""
    user_id: str = "demo-user"


_run_counter = 0


def run_wrk(
    wrk: str, port: int, load: Load, *, connections: int, seconds: float, threads: int = 1
) -> LoadResult:
    """One closed-loop wrk run against 127.0.0.1:port; bounded by `seconds`."""
    global _run_counter
    _run_counter += 1
    # Unique across runs of this process and across bench invocations (event_id).
    prefix = f"b{os.getpid()}x{int(time.time())}r{_run_counter}"
    argv = [
        wrk,
        f"-t{max(1, min(threads, connections))}",
        f"-c{connections}",
        f"-d{max(1, round(seconds))}s",
        "--timeout",
        "30s",
        "-s",
        str(WRK_SCRIPT),
        f"http://{LOOPBACK}:{port}{load.path}",
        "--",
        load.method,
        str(load.expect),
        prefix,
        load.api_key,
        load.user_id,
    ]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=seconds + 60, check=False)
    marker = "BENCH_RESULT "
    line = next((x for x in done.stdout.splitlines() if x.startswith(marker)), None)
    if done.returncode != 0 or line is None:
        raise BenchError(f"wrk failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")
    raw = json.loads(line[len(marker) :])
    return LoadResult(
        requests=int(raw["requests"]),
        seconds=raw["duration_us"] / 1e6,
        p50_ms=raw["p50_us"] / 1000,
        p99_ms=raw["p99_us"] / 1000,
        max_ms=raw["max_us"] / 1000,
        unexpected=int(raw["unexpected"]),
        socket_errors=int(raw["connect"] + raw["read"] + raw["write"] + raw["timeout"]),
    )
