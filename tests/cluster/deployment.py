"""What the cluster tests run: the processes of each "host", and an SMTP peer's handler
that can leave a send hanging (tests/cluster/conftest.py starts them)."""

from __future__ import annotations

import asyncio
import threading
from dataclasses import dataclass

import httpx

from scripts.rabbit_cluster import RabbitCluster
from tests.peers.smtp import ScriptedHandler, SmtpPeer
from tests.processes import ScriptProcess, WebProcess


class StallingHandler(ScriptedHandler):
    """The SMTP peer's handler, which can leave the first message to one address hanging
    in DATA (its sender stuck mid-send, to be killed there) and answers it 451 when
    released, so that attempt is never counted as delivered."""

    def reset(self) -> None:
        super().reset()
        self.stall_address: str | None = None
        self.stalled = threading.Event()
        self.release = threading.Event()

    async def handle_DATA(self, server, session, envelope):
        if self.stall_address in envelope.rcpt_tos and not self.stalled.is_set():
            self.stalled.set()
            while not self.release.is_set():
                await asyncio.sleep(0.05)
            return "451 4.3.0 Try again later"
        return await super().handle_DATA(server, session, envelope)


@dataclass
class Host:
    """The processes one host runs, with that host's environment."""

    name: str
    env: dict[str, str]
    worker: ScriptProcess | None = None
    relay: ScriptProcess | None = None
    beat: ScriptProcess | None = None

    def processes(self) -> list[ScriptProcess]:
        return [self.worker, self.relay, self.beat]

    def start_worker(self) -> ScriptProcess:
        """The host's worker: scripts/worker.sh for `medium` (order events), also taking
        `high` (beat's sweeps), to keep the process count down on two cores."""
        worker = ScriptProcess(
            "worker.sh",
            "medium",
            "-Q",
            "high,medium",
            env=self.env,
            name=f"cluster-{self.name}-worker",
        )
        worker.start()
        self.worker = worker
        return worker


@dataclass
class Deployment:
    cluster: RabbitCluster
    smtp: SmtpPeer
    web: WebProcess
    hosts: list[Host]
    client: httpx.Client | None = None  # the API, with this test's key (`live`)

    @property
    def beats(self) -> list[ScriptProcess]:
        return [host.beat for host in self.hosts]
