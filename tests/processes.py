"""The platform's own processes, run as children by the tests: a Celery worker and the
outbox relay, each logging to artifacts/."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ARTIFACTS = ROOT / "artifacts"


def stop_child(process: subprocess.Popen | None) -> None:
    """SIGTERM (a clean shutdown), then SIGKILL if it is not gone in 15 s."""
    stop_children([process])


def stop_children(processes: list[subprocess.Popen | None]) -> None:
    """`stop_child` for several at once: all are sent SIGTERM first, so their clean
    shutdowns overlap instead of running one after another; SIGKILL for any that is not
    gone 15 s later."""
    running = [p for p in processes if p and p.poll() is None]
    for process in running:
        process.terminate()
    deadline = time.monotonic() + 15
    for process in running:
        try:
            process.wait(timeout=max(deadline - time.monotonic(), 0.01))
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


class WorkerProcess:
    """Celery's worker as a child process (tests/scripts/worker.py), logging to
    artifacts/."""

    def __init__(
        self,
        env: dict[str, str],
        *,
        name: str,
        queues: str = "high,medium,low",
        pool: str = "prefork",
        concurrency: int = 2,
    ):
        self.env = env
        self.name = name
        self.queues = queues
        self.pool = pool
        self.concurrency = concurrency
        self.process: subprocess.Popen | None = None
        ARTIFACTS.mkdir(exist_ok=True)
        self.log_path = ARTIFACTS / f"worker-{name}.log"

    def start(self, timeout: float = 30.0) -> None:
        self.spawn()
        self.wait_ready(timeout)

    def spawn(self) -> None:
        """Start the process without waiting for it (`wait_ready` does): several workers
        spawned first and then waited for start up side by side."""
        log = open(self.log_path, "ab")  # noqa: SIM115 - owned by the child for its life
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tests.scripts.worker",  # `celery worker` without its command line
                f"{self.name}@%h",
                self.queues,
                self.pool,
                str(self.concurrency),
            ],
            cwd=ROOT,
            env=self.env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )

    def wait_ready(self, timeout: float = 30.0) -> None:
        """Return once the worker answers a ping (it consumes by then); a worker on a
        broker of its own (CELERY_BROKER_URL in its environment, not the suite's), once
        it logs that it is ready, as Celery does when its consumers have started."""
        from config.celery import app

        own_broker = self.env.get("CELERY_BROKER_URL", app.conf.broker_url) != app.conf.broker_url
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"worker exited at start; see {self.log_path}")
            if own_broker:
                if self._logged_ready():
                    return
                time.sleep(0.1)
                continue
            # Addressed to this node, the ping returns as soon as it answers (an
            # unaddressed one always waits out its whole timeout).
            replies = app.control.ping(destination=[self.node], timeout=0.5)
            if any(any(key.startswith(f"{self.name}@") for key in reply) for reply in replies):
                return
        raise RuntimeError(f"worker was not ready in {timeout}s; see {self.log_path}")

    def _logged_ready(self) -> bool:
        """Celery's "NAME@HOST ready." is in the log (a worker of a name used before
        shares that one's log: such a worker takes a name of its own)."""
        lines = self.log_path.read_text(errors="replace").splitlines()
        return any(f" {self.name}@" in line and line.endswith(" ready.") for line in lines)

    def stop(self) -> None:
        stop_child(self.process)

    def wait_idle(self, timeout: float = 10.0) -> None:
        """Return once the worker runs no task (best effort, bounded by `timeout`)."""
        from config.celery import app

        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                active = app.control.inspect(destination=[self.node], timeout=0.5).active()
            except Exception:
                return
            if active is not None and not active.get(self.node):
                return
            time.sleep(0.1)

    @property
    def node(self) -> str:
        return f"{self.name}@{socket.gethostname()}"

    def consumes(self, queues: tuple[str, ...]) -> bool:
        """Whether the worker answers and consumes every one of `queues` right now."""
        from config.celery import app

        try:
            answer = app.control.inspect(destination=[self.node], timeout=2).active_queues()
        except Exception:
            return False
        names = {queue["name"] for queue in (answer or {}).get(self.node, [])}
        return set(queues) <= names

    def restore(self, queues: tuple[str, ...]) -> None:
        """Consume `queues` again; a worker that cannot (e.g. after a broker restart left
        it half-connected) is replaced by a fresh one."""
        from config.celery import app

        try:
            for queue in queues:
                app.control.add_consumer(queue, destination=[self.node], reply=True, timeout=2)
        except Exception:
            pass
        if not self.consumes(queues):
            self.stop()
            self.start()


class RelayProcess:
    """`manage.py outbox_relay` as a child process: it publishes what intake accepts."""

    def __init__(self, env: dict[str, str]) -> None:
        self.env = env
        self.process: subprocess.Popen | None = None
        ARTIFACTS.mkdir(exist_ok=True)
        self.log_path = ARTIFACTS / "relay.log"

    def start(self) -> None:
        log = open(self.log_path, "ab")  # noqa: SIM115 - owned by the child for its life
        self.process = subprocess.Popen(
            # Django's system checks are the suite's own tests (tests/config); run at
            # each of the suite's many process starts they cost 0.6 s of CPU apiece.
            [sys.executable, "manage.py", "outbox_relay", "--skip-checks"],
            cwd=ROOT,
            env=self.env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )

    def stop(self) -> None:
        stop_child(self.process)

    def kill(self) -> None:
        """SIGKILL, as a crash would."""
        if self.process and self.process.poll() is None:
            self.process.kill()
            self.process.wait()


class WebProcess:
    """`scripts/web.sh` (the production web command: gunicorn, WSGI; the live stream is
    scripts/stream.sh's) as a child process on a free loopback port, logging to
    artifacts/."""

    def __init__(self, env: dict[str, str], *, name: str = "web") -> None:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        self.env = {**env, "HOST": "127.0.0.1", "PORT": str(self.port), "WEB_CONCURRENCY": "1"}
        self.process: subprocess.Popen | None = None
        ARTIFACTS.mkdir(exist_ok=True)
        self.log_path = ARTIFACTS / f"{name}.log"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 30.0) -> None:
        log = open(self.log_path, "ab")  # noqa: SIM115 - owned by the child for its life
        self.process = subprocess.Popen(
            ["bash", "scripts/web.sh"],
            cwd=ROOT,
            env=self.env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"web exited at start; see {self.log_path}")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.5).close()
                return
            except OSError:
                time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"web did not listen in {timeout}s; see {self.log_path}")

    def stop(self) -> None:
        stop_child(self.process)


class ScriptProcess:
    """One of the shipped process scripts (`scripts/worker.sh medium`, `scripts/relay.sh
    high,medium`, `scripts/beat.sh`, ...) as a child, logging to artifacts/NAME.log
    (NAME-gwN.log under xdist).
    The scripts `exec` their program, so the child's pid is the program's: `kill` is a
    crash of that process (SIGKILL), `stop` a clean shutdown."""

    def __init__(
        self, script: str, *args: str, env: dict[str, str], name: str, new_session: bool = False
    ) -> None:
        self.command = ["bash", f"scripts/{script}", *args]
        self.env = env
        self.name = name
        # A session of its own: no signal meant for the test's process group reaches it.
        self.new_session = new_session
        self.process: subprocess.Popen | None = None
        ARTIFACTS.mkdir(exist_ok=True)
        # One log per test process under xdist: wait_logged reads what this run appended,
        # and the same process type started by another test process at the same time
        # would otherwise append its own "ready" line to the file first.
        worker = os.environ.get("PYTEST_XDIST_WORKER")
        self.log_path = ARTIFACTS / (f"{name}-{worker}.log" if worker else f"{name}.log")
        self._log_start = 0

    def start(self) -> None:
        self.log_path.touch()
        self._log_start = self.log_path.stat().st_size  # what this run logs comes after
        log = open(self.log_path, "ab")  # noqa: SIM115 - owned by the child for its life
        self.process = subprocess.Popen(
            self.command,
            cwd=ROOT,
            env=self.env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=self.new_session,
        )

    def log(self) -> str:
        """What this run of the process has logged so far."""
        with open(self.log_path, "rb") as handle:
            handle.seek(self._log_start)
            return handle.read().decode("utf-8", errors="replace")

    def wait_logged(self, text: str, timeout: float = 30.0) -> None:
        """Return once this run has logged `text`; fail if it exits first."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if text in self.log():
                return
            if self.process is not None and self.process.poll() is not None:
                raise RuntimeError(
                    f"{self.name} exited before logging {text!r}; see {self.log_path}"
                )
            time.sleep(0.1)
        raise RuntimeError(f"{self.name} did not log {text!r} in {timeout}s; see {self.log_path}")

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def kill(self) -> None:
        """SIGKILL, as a crash would."""
        if self.running:
            self.process.kill()
            self.process.wait()

    def stop(self) -> None:
        stop_child(self.process)
