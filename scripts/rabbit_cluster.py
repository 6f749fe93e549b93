"""A RabbitMQ cluster of three plain `rabbitmq-server` nodes on loopback, for the tests
(tests/cluster/), the bench's cluster run (bench/broker_cluster.py) and a developer who
wants one: `.venv/bin/python -m scripts.rabbit_cluster` boots it, prints the broker list
for CELERY_BROKER_URL and stops it on Ctrl-C.

Each node has its own name (notify-cN-<run>@localhost), AMQP and distribution ports, data and
log directories under one temporary directory, and the cluster's own Erlang cookie (in
a HOME of its own, so the machine's node, rabbit@localhost, is never touched). Nodes 2
and 3 join node 1 with `stop_app` / `join_cluster` / `start_app`, as an operator would.
A node is killed the hard way (SIGKILL to its Erlang VM) and restarted on its own data,
and then rejoins by itself.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import signal
import subprocess
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from scripts.ports import unused_port

# The server's own scripts, not the Debian wrapper in /usr/sbin, which switches to the
# `rabbitmq` user and its HOME (and so to the machine node's cookie).
RABBITMQ_BIN = Path(os.environ.get("NOTIFY_TEST_RABBITMQ_BIN", "/usr/lib/rabbitmq/bin"))
VHOST = "notify"
USER = "guest"  # RabbitMQ lets guest in from loopback, which is all we use
PASSWORD = "guest"
# Seconds a node may take to boot (2 cores, three nodes booting side by side).
BOOT_TIMEOUT = float(os.environ.get("NOTIFY_TEST_RABBITMQ_BOOT_TIMEOUT", "90"))
# What every node runs with: the shipped compose cluster's settings (docs/scaling.md).
NODE_CONFIG = f"""\
cluster_partition_handling = pause_minority
queue_leader_locator = balanced
default_vhost = {VHOST}
default_user = {USER}
default_pass = {PASSWORD}
"""


def side_by_side(action, nodes: list[RabbitNode]) -> None:
    """`action(node)` for each node in a thread of its own; the first error is raised."""
    if not nodes:  # a cluster of one: nobody joins
        return
    with ThreadPoolExecutor(max_workers=len(nodes)) as pool:
        for future in [pool.submit(action, node) for node in nodes]:
            future.result()


@dataclass
class RabbitNode:
    index: int
    base: Path
    run: str  # in the node's name, so a node left over from a killed run never clashes
    amqp_port: int = field(default_factory=unused_port)
    dist_port: int = field(default_factory=unused_port)
    process: subprocess.Popen | None = None

    @property
    def name(self) -> str:
        return f"notify-c{self.index}-{self.run}@localhost"

    @property
    def url(self) -> str:
        return f"amqp://{USER}:{PASSWORD}@127.0.0.1:{self.amqp_port}/{VHOST}"

    @property
    def directory(self) -> Path:
        return self.base / f"n{self.index}"

    @property
    def log_path(self) -> Path:
        return self.directory / "server.log"

    def environment(self) -> dict[str, str]:
        return {
            **os.environ,
            "HOME": str(self.base / "home"),
            "RABBITMQ_NODENAME": self.name,
            "RABBITMQ_NODE_IP_ADDRESS": "127.0.0.1",
            "RABBITMQ_NODE_PORT": str(self.amqp_port),
            "RABBITMQ_DIST_PORT": str(self.dist_port),
            "RABBITMQ_MNESIA_BASE": str(self.directory / "mnesia"),
            "RABBITMQ_LOG_BASE": str(self.directory / "log"),
            "RABBITMQ_PID_FILE": str(self.directory / "pid"),
            "RABBITMQ_ENABLED_PLUGINS_FILE": str(self.base / "enabled_plugins"),
            "RABBITMQ_CONF_ENV_FILE": str(self.base / "rabbitmq-env.conf"),
            "RABBITMQ_CONFIG_FILE": str(self.base / "rabbitmq"),
            # Distribution (node to node, CLI to node) on loopback only.
            "RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS": "-kernel inet_dist_use_interface {127,0,0,1}",
            # Each CLI call is a short-lived Erlang VM; its schedulers spinning while
            # idle only take CPU from the nodes on a small box (the server's default
            # is already no spinning).
            "RABBITMQ_CTL_ERL_ARGS": "+sbwt none +sbwtdcpu none +sbwtdio none",
        }

    def start(self) -> None:
        """Boot the node (in the background; `wait_booted` waits for it)."""
        self.directory.mkdir(parents=True, exist_ok=True)
        (self.directory / "pid").unlink(missing_ok=True)
        log = open(self.log_path, "ab")  # noqa: SIM115 - owned by the child for its life
        self.process = subprocess.Popen(
            [str(RABBITMQ_BIN / "rabbitmq-server")],
            env=self.environment(),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def wait_booted(self, timeout: float = BOOT_TIMEOUT) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process is not None and self.process.poll() is not None:
                raise RuntimeError(f"{self.name} exited while booting; see {self.log_path}")
            if (self.directory / "pid").exists() and self.ctl(
                "await_startup", "--timeout", "5", check=False
            ).returncode == 0:
                return
            time.sleep(0.3)
        raise RuntimeError(f"{self.name} did not boot in {timeout}s; see {self.log_path}")

    def ctl(
        self, *args: str, tool: str = "rabbitmqctl", check: bool = True
    ) -> subprocess.CompletedProcess:
        """Run a CLI tool against this node."""
        done = subprocess.run(
            [str(RABBITMQ_BIN / tool), "-q", "-n", self.name, *args],
            env=self.environment(),
            capture_output=True,
            text=True,
            timeout=60,
        )
        if check and done.returncode != 0:
            raise RuntimeError(
                f"{tool} {' '.join(args)} on {self.name}: {done.stderr or done.stdout}"
            )
        return done

    @property
    def os_pid(self) -> int:
        """The Erlang VM's process id (the server writes it when it boots)."""
        return int((self.directory / "pid").read_text().strip())

    def kill(self) -> None:
        """SIGKILL the Erlang VM: the node dies as in a crash, nothing closed cleanly."""
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.os_pid, signal.SIGKILL)
        if self.process is not None:
            self.process.wait(timeout=30)

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None


class RabbitCluster:
    """Three nodes (or `size`; one is a lone broker), clustered, with the vhost the
    tests use."""

    def __init__(self, size: int = 3) -> None:
        if not (RABBITMQ_BIN / "rabbitmq-server").exists():
            raise RuntimeError(
                f"no rabbitmq-server under {RABBITMQ_BIN}: install Debian's rabbitmq-server "
                "(scripts/services.sh needs it too)"
            )
        self.base = Path(tempfile.mkdtemp(prefix="notify-cluster-"))
        home = self.base / "home"
        home.mkdir()
        cookie = home / ".erlang.cookie"
        cookie.write_text(secrets.token_hex(20))
        cookie.chmod(0o400)
        (self.base / "enabled_plugins").write_text("[].\n")
        (self.base / "rabbitmq-env.conf").write_text("ERL_EPMD_ADDRESS=127.0.0.1\n")
        (self.base / "rabbitmq.conf").write_text(NODE_CONFIG)
        run = secrets.token_hex(3)
        self.nodes = [RabbitNode(index, self.base, run) for index in range(1, size + 1)]
        self.timings: dict[str, float] = {}
        self._booting_since = 0.0

    def start(self) -> None:
        """Boot every node side by side, then join nodes 2.. to node 1."""
        self.boot()
        self.form()

    def boot(self) -> None:
        """Start booting every node, without waiting: the caller may start what does not
        need the broker yet (`urls` is known already), then `form` the cluster."""
        self._booting_since = time.monotonic()
        for node in self.nodes:
            node.start()

    def form(self) -> None:
        """Wait for the nodes `boot` started, then join nodes 2.. to node 1."""
        started = self._booting_since
        for node in self.nodes:
            node.wait_booted()
        self.timings["boot"] = time.monotonic() - started
        # Node 1 made the vhost at its first boot (default_vhost, with guest's
        # permissions); the others take node 1's once they join. Joins go one at a
        # time; stopping and starting the apps, side by side.
        first, others = self.nodes[0], self.nodes[1:]
        side_by_side(lambda node: node.ctl("stop_app"), others)
        for node in others:
            node.ctl("join_cluster", first.name)
        side_by_side(lambda node: node.ctl("start_app"), others)
        self.timings["start"] = time.monotonic() - started

    def urls(self, order: list[int] | None = None) -> str:
        """The failover list (Celery's "url;url;url") in the given order of node indexes."""
        order = order or [node.index for node in self.nodes]
        return ";".join(self.node(index).url for index in order)

    def node(self, index: int) -> RabbitNode:
        return self.nodes[index - 1]

    def any_running(self) -> RabbitNode:
        for node in self.nodes:
            if node.running:
                return node
        raise RuntimeError("no node of the cluster is running")

    def leader(self, queue: str) -> RabbitNode:
        """The node that leads quorum queue `queue` now (asked live, not from stats)."""
        answer = self.any_running().ctl(
            "quorum_status", queue, "--vhost", VHOST, "--formatter", "json", tool="rabbitmq-queues"
        )
        for member in json.loads(answer.stdout):
            if member.get("Raft State") == "leader":
                return next(n for n in self.nodes if n.name == member["Node Name"])
        raise RuntimeError(f"queue {queue} has no leader now: {answer.stdout}")

    def members_in_sync(self, queue: str) -> bool:
        """Every member of `queue` runs and has committed what the leader has."""
        answer = self.any_running().ctl(
            "quorum_status",
            queue,
            "--vhost",
            VHOST,
            "--formatter",
            "json",
            tool="rabbitmq-queues",
            check=False,
        )
        if answer.returncode != 0:
            return False
        members = json.loads(answer.stdout)
        states = {member.get("Raft State") for member in members}
        commits = {member.get("Commit Index") for member in members}
        return (
            len(members) == len(self.nodes)
            and states <= {"leader", "follower"}
            and len(commits) == 1
        )

    def wait_in_sync(self, queues: list[str], timeout: float = 60.0, pause: float = 1.0) -> None:
        """Return once every member of each of `queues` runs and has caught up. Looked
        at once per `pause`: each look starts a CLI VM, CPU the catching-up node needs."""
        deadline = time.monotonic() + timeout
        while not all(self.members_in_sync(queue) for queue in queues):
            if time.monotonic() > deadline:
                raise RuntimeError(f"{queues} not in sync on every node after {timeout}s")
            time.sleep(pause)

    def stop(self) -> None:
        """Kill every node and remove the cluster's directory."""
        for node in self.nodes:
            if node.running:
                node.kill()
        shutil.rmtree(self.base, ignore_errors=True)


def main() -> None:
    """Boot a cluster, print its broker list, wait for Ctrl-C, then remove it."""
    cluster = RabbitCluster()
    try:
        cluster.start()
        print(
            f"booted in {cluster.timings['boot']:.1f} s, clustered in "
            f"{cluster.timings['start']:.1f} s; data in {cluster.base}"
        )
        print(f"CELERY_BROKER_URL='{cluster.urls()}' NOTIFY_QUEUE_TYPE=quorum", flush=True)
        signal.sigwait({signal.SIGINT, signal.SIGTERM})
    finally:
        cluster.stop()


if __name__ == "__main__":
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
    main()
