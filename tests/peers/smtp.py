"""A real SMTP server (aiosmtpd) whose answers a test scripts, recording what it got."""

from __future__ import annotations

import asyncio
import email
import email.policy
import threading
import time
from collections import deque
from dataclasses import dataclass
from email.message import EmailMessage

from aiosmtpd.controller import Controller

from scripts.ports import unused_port


@dataclass(frozen=True)
class ReceivedMail:
    received_at: float
    mail_from: str
    rcpt_tos: list[str]
    message: EmailMessage

    @property
    def subject(self) -> str:
        return str(self.message["Subject"])

    def part(self, content_type: str) -> str:
        for part in self.message.walk():
            if part.get_content_type() == content_type:
                return part.get_content()
        return ""


class ScriptedHandler:
    """Answers RCPT and DATA from scripts; default 250. Thread-safe enough for tests."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.reset()

    def reset(self) -> None:
        with getattr(self, "lock", threading.Lock()):
            self.received: list[ReceivedMail] = []
            self.data_calls: list[float] = []
            self.data_started: list[float] = []  # when each DATA came in, before any delay
            self.mail_answers: deque[str] = deque()  # answers to MAIL FROM, then 250
            self.rcpt_answers: deque[str] = deque()
            # Answers to RCPT by address, every time (after `rcpt_answers` runs out).
            self.rcpt_by_address: dict[str, str] = {}
            self.data_answers: deque[str] = deque()
            self.default_data_answer = "250 Message accepted"
            self.data_delay = 0.0  # seconds the server takes before answering DATA
            self.sessions = 0  # SMTP sessions opened (EHLO/HELO greetings)
            # Offer PIPELINING in the EHLO answer, as production relays do.
            self.pipelining = True

    async def handle_EHLO(self, server, session, envelope, hostname, responses):
        session.host_name = hostname
        with self.lock:
            self.sessions += 1
        if self.pipelining:
            responses.insert(len(responses) - 1, "250-PIPELINING")
        return responses

    async def handle_MAIL(self, server, session, envelope, address, mail_options):
        with self.lock:
            answer = self.mail_answers.popleft() if self.mail_answers else "250 OK"
        if not answer.startswith("250"):
            return answer
        envelope.mail_from = address
        envelope.mail_options.extend(mail_options)
        return "250 OK"

    async def handle_RCPT(self, server, session, envelope, address, rcpt_options):
        with self.lock:
            if self.rcpt_answers:
                answer = self.rcpt_answers.popleft()
            else:
                answer = self.rcpt_by_address.get(address, "250 OK")
        if not answer.startswith("250"):
            return answer
        envelope.rcpt_tos.append(address)
        return "250 OK"

    async def handle_DATA(self, server, session, envelope):
        with self.lock:
            self.data_started.append(time.time())
        if self.data_delay:
            await asyncio.sleep(self.data_delay)
            transport = getattr(server, "transport", None)
            if transport is None or transport.is_closing():
                # The client went away before our answer: like a real relay, this server
                # never took responsibility for the message, so it is not delivered.
                return "421 4.4.2 Client went away"
        with self.lock:
            self.data_calls.append(time.time())
            answer = self.data_answers.popleft() if self.data_answers else self.default_data_answer
            if answer.startswith("250"):
                message = email.message_from_bytes(envelope.content, policy=email.policy.default)
                self.received.append(
                    ReceivedMail(time.time(), envelope.mail_from, list(envelope.rcpt_tos), message)
                )
        return answer


class SmtpPeer:
    def __init__(self) -> None:
        self.handler = ScriptedHandler()
        self.port = unused_port()
        self.controller = Controller(self.handler, hostname="127.0.0.1", port=self.port)

    def start(self) -> None:
        self.controller.start()

    def stop(self) -> None:
        self.controller.stop()

    @property
    def received(self) -> list[ReceivedMail]:
        return list(self.handler.received)
