"""What the benchmarks stand on: isolated places, child processes, wrk and a sampler.

Nothing here knows a scenario; bench/__main__.py and bench/servers.py compose these.
Every child process runs in its own session, so stopping it stops what it started too
(the web server's worker processes); `Stack` stops them all, whatever happens.
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import IO
from urllib.parse import urlsplit, urlunsplit

import psycopg
from psycopg import sql

ROOT = Path(__file__).resolve().parent.parent
LOG_DIR = ROOT / "var" / "bench"
WRK_SCRIPT = Path(__file__).resolve().parent / "load.lua"
LOOPBACK = "127.0.0.1"


class BenchError(RuntimeError):
    """A step of the bench could not be done; the message says which and why."""


def env_int(name: str, default: int) -> int:
    raw = os.environ.get(name, "")
    try:
        return int(raw) if raw else default
    except ValueError:
        raise BenchError(f"{name} must be a whole number, not {raw!r}") from None


def env_float(name: str, default: float) -> float:
    raw = os.environ.get(name, "")
    try:
        return float(raw) if raw else default
    except ValueError:
        raise BenchError(f"{name} must be a number, not {raw!r}") from None


# --- The machine ------------------------------------------------------------------------


def machine_line() -> str:
    """nproc, CPU model, kernel and Python: printed first, so numbers have their context."""
    model = platform.processor() or "unknown CPU"
    with contextlib.suppress(OSError), open("/proc/cpuinfo", encoding="utf-8") as cpuinfo:
        for line in cpuinfo:
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    load = ", ".join(f"{value:.2f}" for value in os.getloadavg())
    return (
        f"machine: {os.cpu_count()} CPUs ({model}), Linux {platform.release()}, "
        f"Python {platform.python_version()}; load average {load}"
    )


# --- Isolated places: database, broker vhost, Redis database ------------------------------


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


def free_port() -> int:
    """A TCP port nobody listens on right now, on loopback."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((LOOPBACK, 0))
        return int(probe.getsockname()[1])


# --- Child processes ------------------------------------------------------------------------


class Proc:
    """A child process in its own session, logging to var/bench/NAME.log."""

    def __init__(self, name: str, argv: Sequence[str], env: dict[str, str]) -> None:
        LOG_DIR.mkdir(parents=True, exist_ok=True)
        self.name = name
        self.log_path = LOG_DIR / f"{name}.log"
        self._log: IO[bytes] = open(self.log_path, "wb")  # noqa: SIM115 closed in stop()
        self.started = time.perf_counter()
        self.popen = subprocess.Popen(
            list(argv),
            cwd=ROOT,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group: stop() reaches its children
        )

    def alive(self) -> bool:
        return self.popen.poll() is None

    def check(self) -> None:
        """Raise, with the end of its log, if the process has exited."""
        if not self.alive():
            raise BenchError(
                f"{self.name} exited with {self.popen.returncode}; "
                f"end of {self.log_path}:\n{self.tail()}"
            )

    def tail(self, lines: int = 25) -> str:
        with contextlib.suppress(OSError):
            text = self.log_path.read_text(errors="replace").splitlines()
            return "\n".join(text[-lines:])
        return ""

    def stop(self, timeout: float = 20.0) -> None:
        """SIGTERM the whole group (a warm shutdown), then SIGKILL what is left."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.popen.pid, signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.popen.wait(timeout=timeout)
        # Children that outlived their parent (or ignored TERM) are still in the group.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.popen.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.popen.wait(timeout=5)
        self._log.close()


class Stack:
    """The processes started by a bench run; all are stopped on exit, even on failure."""

    def __init__(self) -> None:
        self._procs: list[Proc] = []

    def __enter__(self) -> Stack:
        # SIGTERM/SIGHUP become SystemExit, so `with` blocks unwind and stop everything.
        for signum in (signal.SIGTERM, signal.SIGHUP):
            signal.signal(signum, _exit_on_signal)
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop_all()

    def start(self, name: str, argv: Sequence[str], env: dict[str, str]) -> Proc:
        proc = Proc(name, argv, env)
        self._procs.append(proc)
        return proc

    def stop(self, proc: Proc) -> None:
        proc.stop()
        if proc in self._procs:
            self._procs.remove(proc)

    def stop_all(self) -> None:
        while self._procs:
            self._procs.pop().stop()


def _exit_on_signal(signum: int, frame: FrameType | None) -> None:
    raise SystemExit(128 + signum)


def wait_http(url: str, proc: Proc, timeout: float = 90.0) -> None:
    """Wait until `url` answers 200, failing early if the server process died."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        proc.check()
        try:
            with urllib.request.urlopen(url, timeout=2) as answer:
                if answer.status == 200:
                    return
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(0.25)
    raise BenchError(f"{url} did not answer within {timeout:.0f} s; end of log:\n{proc.tail()}")


def wait_port(port: int, proc: Proc, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        proc.check()
        with contextlib.suppress(OSError), socket.create_connection((LOOPBACK, port), 1):
            return
        time.sleep(0.1)
    raise BenchError(f"{proc.name} did not listen on {port} within {timeout:.0f} s")


# --- Load: wrk --------------------------------------------------------------------------------


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


# --- PostgreSQL backends --------------------------------------------------------------------


class BackendSampler:
    """Samples how many backends serve the bench database, every `interval` seconds,
    from its own connection (not counted), and keeps the peak."""

    def __init__(self, places: Places, interval: float = 0.05) -> None:
        self._places = places
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
                        " WHERE datname = %s AND pid <> pg_backend_pid()",
                        (self._places.database_name,),
                    ).fetchone()
                    self.peak = max(self.peak, int(row[0]) if row else 0)
                    self._stop.wait(self._interval)
        except psycopg.Error as error:
            self.error = str(error)


# --- Small helpers ----------------------------------------------------------------------------


def python() -> str:
    """The interpreter running the bench (the repo's .venv under `make bench`)."""
    return sys.executable


@contextlib.contextmanager
def phase(title: str) -> Iterator[None]:
    """Prints what is being measured and how long it took, on stderr (not the results)."""
    started = time.perf_counter()
    print(f"bench: {title} ...", file=sys.stderr, flush=True)
    yield
    print(
        f"bench: {title}: done in {time.perf_counter() - started:.0f} s",
        file=sys.stderr,
        flush=True,
    )
