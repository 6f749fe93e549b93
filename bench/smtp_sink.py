"""The scenarios' SMTP sinks, and S7's baseline: a bare smtplib loop into the same sink.

Every sink is aiosmtpd's server (`python -m aiosmtpd`, on a free loopback port, in its
own process) with a handler that drops what it takes and offers PIPELINING, as the
relays a deployment sends to do. S7's also keeps how many messages arrived and when the
last one did, and writes both to a status file the bench reads: the time of the last
email is the sink's own, not the moment the bench looked.
"""

from __future__ import annotations

import asyncio
import os
import smtplib
import time
from dataclasses import dataclass
from typing import Any

from bench.config import LOOPBACK, BenchError
from bench.processes import LOG_DIR, Proc, Stack, python, wait_port
from scripts.ports import unused_port

WRITE_DELAY = 0.02  # seconds between a message and the status write it schedules
SENDER = "bench@bench.example"
# BENCH_SMTP_PIPELINING=0: a sink that does not offer PIPELINING, to see what it is worth.
PIPELINING = os.environ.get("BENCH_SMTP_PIPELINING", "1") != "0"


class DroppingSink:
    """An aiosmtpd handler that accepts and drops every message, as aiosmtpd's own Sink
    does, and offers PIPELINING, as the relays a deployment sends to do (Postfix, Exim,
    SES, SendGrid): the product then sends an email in two round trips, as it would
    there, and smtplib's baseline loop in four, as it always does. Every scenario's sink.

    python -m aiosmtpd -n -c bench.smtp_sink.DroppingSink -l HOST:PORT
    """

    async def handle_EHLO(
        self, server: Any, session: Any, envelope: Any, hostname: str, responses: list[str]
    ) -> list[str]:
        """aiosmtpd's answer plus PIPELINING (unless BENCH_SMTP_PIPELINING=0)."""
        session.host_name = hostname
        if PIPELINING:
            responses.insert(len(responses) - 1, "250-PIPELINING")
        return responses

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        return "250 OK"


class CountingSink(DroppingSink):
    """The dropping sink, counting the messages (S7).

    python -m aiosmtpd -n -c bench.smtp_sink.CountingSink -l HOST:PORT STATUS_PATH
    """

    def __init__(self, status_path: str) -> None:
        self.status_path = status_path
        self.count = 0
        self.last = 0.0
        self._pending = False
        self._write()

    @classmethod
    def from_cli(cls, parser: Any, *args: str) -> CountingSink:
        if len(args) != 1:
            parser.error("CountingSink takes one argument: the status file's path")
        return cls(args[0])

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        self.count += 1
        self.last = time.time()
        # One write per burst, not per message: the status file is read, not the log.
        if not self._pending:
            self._pending = True
            asyncio.get_running_loop().call_later(WRITE_DELAY, self._write)
        return "250 OK"

    def _write(self) -> None:
        self._pending = False
        temporary = f"{self.status_path}.tmp"
        with open(temporary, "w", encoding="ascii") as status:
            status.write(f"{self.count} {self.last!r}\n")
        os.replace(temporary, self.status_path)  # the reader never sees half a line


@dataclass(frozen=True)
class SinkStatus:
    """How many messages the sink received so far, and when the last one arrived."""

    count: int
    last: float


class Sink:
    """A counting sink started by the bench, and how to read it."""

    def __init__(self, stack: Stack, env: dict[str, str]) -> None:
        self.port = unused_port()
        self.status_path = LOG_DIR / f"smtp-count-{self.port}.status"
        self.proc: Proc = stack.start(
            "smtp-count",
            [
                python(),
                "-m",
                "aiosmtpd",
                "-n",
                "-c",
                "bench.smtp_sink.CountingSink",
                "-l",
                f"{LOOPBACK}:{self.port}",
                str(self.status_path),
            ],
            env,
        )
        wait_port(self.port, self.proc)
        self.env = {**env, "EMAIL_HOST": LOOPBACK, "EMAIL_PORT": str(self.port)}

    def stop(self, stack: Stack) -> None:
        """Stop the sink and remove its status file."""
        stack.stop(self.proc)
        self.status_path.unlink(missing_ok=True)

    def status(self) -> SinkStatus:
        """The last status the sink wrote (at most WRITE_DELAY old)."""
        try:
            count, last = self.status_path.read_text(encoding="ascii").split()
        except (OSError, ValueError):
            self.proc.check()
            return SinkStatus(0, 0.0)
        return SinkStatus(int(count), float(last))

    def wait_count(self, count: int, timeout: float) -> SinkStatus:
        """Wait until the sink has received `count` messages in all; its status then."""
        deadline = time.monotonic() + timeout
        while (status := self.status()).count < count:
            if time.monotonic() > deadline:
                raise BenchError(f"the sink has {status.count} of {count} messages")
            self.proc.check()
            time.sleep(0.01)
        return status


def sample_message() -> bytes:
    """A campaign email as Django builds one (text and HTML), to send as is N times."""
    from django.core.mail import EmailMultiAlternatives

    message = EmailMultiAlternatives(
        subject="Bench sale: -30% on boots",
        body="Bench sale: -30% on boots\nSee the offers: https://shop.example/x",
        from_email=SENDER,
        to=["r1@bench.example"],
    )
    message.attach_alternative(
        '<h1>Bench sale: -30% on boots</h1><p><a href="https://shop.example/x">See the '
        "offers</a></p>",
        "text/html",
    )
    return message.message().as_bytes()


@dataclass(frozen=True)
class Loop:
    """One baseline run: n messages over one SMTP connection."""

    n: int
    seconds: float  # connect -> the last message received by the sink

    @property
    def rate(self) -> float:
        return self.n / self.seconds


def smtp_loop(sink: Sink, n: int, timeout: float) -> Loop:
    """The baseline: one connection, n sendmail calls in a row, into the sink."""
    message = sample_message()
    before = sink.status().count
    started = time.time()
    with smtplib.SMTP(LOOPBACK, sink.port, timeout=30) as smtp:
        for number in range(n):
            smtp.sendmail(SENDER, [f"r{number}@bench.example"], message)
    done = sink.wait_count(before + n, timeout)
    return Loop(n, done.last - started)
