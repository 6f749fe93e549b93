"""Child processes of the bench: started, waited for, and always stopped.

Every child process runs in its own session, so stopping it stops what it started too
(the web server's worker processes); `Stack` stops them all, whatever happens.
"""

from __future__ import annotations

import contextlib
import fnmatch
import os
import shlex
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from types import FrameType
from typing import IO

from bench.config import LOOPBACK, ROOT, BenchError
from scripts.ports import unused_port

LOG_DIR = ROOT / "var" / "bench"


def python() -> str:
    """The interpreter running the bench (the repo's .venv under `make bench`)."""
    return sys.executable


class Proc:
    """A child process in its own session, logging to var/bench/NAME.log; its PostgreSQL
    connections carry "bench:NAME" as application_name (libpq reads PGAPPNAME), so the
    bench can tell whose backend is whose (bench.costs)."""

    def __init__(self, name: str, argv: Sequence[str], env: dict[str, str]) -> None:
        LOG_DIR.mkdir(parents=True, exist_ok=True)
        env = {**env, "PGAPPNAME": f"bench:{name}"}
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

    def cpu_seconds(self) -> float:
        """CPU seconds (user and system) used so far by the processes of its session
        (a worker's pool children included) that are still running."""
        return session_cpu_seconds(self.popen.pid)

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
        """Start `argv` as NAME (its log: var/bench/NAME.log); stopped with the stack."""
        proc = Proc(name, argv, env)
        self._procs.append(proc)
        return proc

    def stop(self, proc: Proc) -> None:
        """Stop one process now, instead of at the end of the run."""
        proc.stop()
        if proc in self._procs:
            self._procs.remove(proc)

    def stop_all(self) -> None:
        """Stop every process still running, the last started first."""
        while self._procs:
            self._procs.pop().stop()


_TICKS = os.sysconf("SC_CLK_TCK")


def process_stat(pid: int | str) -> tuple[str, list[str]] | None:
    """(command name, the fields after it) of /proc/PID/stat, None once it is gone. In
    the fields: state 0, ppid 1, pgrp 2, session 3, ..., utime 11, stime 12 (ticks)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as stat:
            head, _, tail = stat.read().rpartition(")")
    except OSError:
        return None
    fields = tail.split()
    return (head.partition("(")[2], fields) if len(fields) >= 13 else None


def cpu_seconds_of(fields: list[str]) -> float:
    """User and system CPU seconds of a process_stat's fields."""
    return (int(fields[11]) + int(fields[12])) / _TICKS


def session_cpu_seconds(session: int) -> float:
    """CPU seconds (user and system) of the running processes in session `session`."""
    total = 0.0
    for entry in os.scandir("/proc"):
        stat = process_stat(entry.name) if entry.name.isdigit() else None
        if stat is not None and int(stat[1][3]) == session:
            total += cpu_seconds_of(stat[1])
    return total


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
    """Wait until something listens on loopback `port`, failing early if `proc` died."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        proc.check()
        with contextlib.suppress(OSError), socket.create_connection((LOOPBACK, port), 1):
            return
        time.sleep(0.1)
    raise BenchError(f"{proc.name} did not listen on {port} within {timeout:.0f} s")


def start_smtp_sink(stack: Stack, env: dict[str, str]) -> tuple[Proc, dict[str, str]]:
    """An SMTP server that accepts and drops every message and offers PIPELINING, as a
    provider's relay does (bench.smtp_sink.DroppingSink), on a free loopback port;
    returns it and `env` with EMAIL_HOST/EMAIL_PORT pointing at it (for the workers)."""
    port = unused_port()
    sink = stack.start(
        "smtp-sink",
        [
            python(),
            "-m",
            "aiosmtpd",
            "-n",
            "-c",
            "bench.smtp_sink.DroppingSink",
            "-l",
            f"{LOOPBACK}:{port}",
        ],
        env,
    )
    wait_port(port, sink)
    return sink, {**env, "EMAIL_HOST": LOOPBACK, "EMAIL_PORT": str(port)}


def procfile_entries(patterns: tuple[str, ...]) -> list[tuple[str, list[str]]]:
    """(name, argv) of the Procfile's process types whose names match `patterns`."""
    entries = []
    for line in (ROOT / "Procfile").read_text(encoding="utf-8").splitlines():
        name, colon, command = line.partition(":")
        name = name.strip()
        if colon and not name.startswith("#") and any(fnmatch.fnmatch(name, p) for p in patterns):
            entries.append((name, shlex.split(command)))
    if not entries:
        raise BenchError(f"no Procfile entry matches {patterns}")
    return entries
