"""What the email providers' peers share: an HTTP API on loopback that answers each send
as its provider does and records what it was sent, and a webhook post built for a test
to send (to Django's test client or over HTTP to the live server).

A provider's peer (tests/peers/<provider>.py) says where its send endpoint is, how it
authenticates us, how it reads a message and answers one, and builds its provider's
webhook bodies, signed as that provider signs them (or badly, for a test of refusal):
`event(kind, message_id, to)` with kind one of KINDS, then `signed(body)`.
"""

from __future__ import annotations

import base64
import json
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler
from typing import Any

import requests

from tests.peers.base import LoopbackHttpPeer

# The HTTP basic auth ("user:password") the tracking webhooks carry in their URL.
SECRET = "esp-hooks:s3cret-in-the-url"
FORGED = "esp-hooks:forged"
# The events every peer builds: what became of a message after the provider took it
# (`unsubscribe`: the person unsubscribed at the provider, by its link or header).
KINDS = ("delivered", "hard_bounce", "soft_bounce", "complaint", "unsubscribe", "open", "click")
# A provider that reports the person subscribing again builds this one too (its peer's
# `resubscribes`).
RESUBSCRIBE = "resubscribe"

Answer = tuple[int, Any, dict]  # (HTTP status, JSON body / text / None, headers)


def now_iso() -> str:
    return datetime.now(UTC).isoformat().replace("+00:00", "Z")


def basic_auth(user_password: str) -> str:
    """The Authorization header a provider sends for a webhook URL with user:password@."""
    return "Basic " + base64.b64encode(user_password.encode()).decode()


@dataclass
class WebhookPost:
    """One webhook post as the provider makes it."""

    body: bytes
    headers: dict[str, str] = field(default_factory=dict)
    content_type: str = "application/json"

    def to_client(self, client: Any, path: str) -> Any:
        """Post through Django's test client; its answer."""
        return client.generic(
            "POST", path, self.body, content_type=self.content_type, headers=self.headers
        )

    def to_url(self, url: str) -> int:
        """Post over HTTP (to the live server); the status it got."""
        headers = {**self.headers, "Content-Type": self.content_type}
        return requests.post(
            url, data=self.body, headers=headers, timeout=10, allow_redirects=False
        ).status_code


def json_post(body: Any, *, auth: str | None, headers: dict | None = None) -> WebhookPost:
    """A JSON webhook post, with basic auth `auth` ("user:password") when given."""
    sent = dict(headers or {})
    if auth:
        sent["Authorization"] = basic_auth(auth)
    return WebhookPost(json.dumps(body).encode(), sent)


class EspPeer(LoopbackHttpPeer):
    """An email provider's send API on loopback (subclasses say which provider).

    Answers each send as accepted, with a fresh message id, unless a scripted answer is
    queued (`answers`, taken in order), the provider is `down` (that answer to every
    send) or the recipient is one the provider refuses (`inactive`, where the provider
    refuses addresses at send). `received` keeps what
    was sent (each with its `message_id` and `to`); `before_answer`, when set, is called
    with (message id, that record) before the send is answered: a test posts the
    provider's webhook from there to have it overtake the send's record.
    """

    esp = ""  # NOTIFY_EMAIL_ESP
    resubscribes = False  # whether the provider posts a resubscribe (RESUBSCRIBE)

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.reset()
        peer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # quiet
                pass

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                status, answer, headers = peer.answer(self.path, self.headers, body)
                if answer is None:
                    data, kind = b"", "text/plain"
                elif isinstance(answer, str):
                    data, kind = answer.encode(), "text/plain"
                else:
                    data, kind = json.dumps(answer).encode(), "application/json"
                self.send_response(status)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(data)))
                for name, value in headers.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:  # nothing of ours should ever fetch from a peer
                with peer.lock:
                    peer.fetched.append(self.path)
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

        self.serve(Handler)
        self.url = f"{self.origin}/"

    @property
    def hook(self) -> str:
        """The path of our tracking webhook for this provider."""
        return f"/v1/webhooks/email/{self.esp}/tracking/"

    def reset(self) -> None:
        with self.lock:
            self.received: list[dict] = []
            self.answers: deque[Answer] = deque()
            self.inactive: set[str] = set()
            self.before_answer: Callable[[str, dict], None] | None = None
            self.fetched: list[str] = []  # paths of GETs: a SubscribeURL fetched, say
            self.down: Answer | None = None  # when set, every send gets it (an outage)

    def answer(self, path: str, headers: Any, body: bytes) -> Answer:
        refused = self.refuse(path, headers)
        if refused is not None:
            return refused
        message = self.parse(body, headers)
        to = str(message.get("to", ""))
        with self.lock:
            if self.down is not None:
                return self.down
            if self.answers:
                return self.answers.popleft()
            if to.lower() in self.inactive:
                return self.inactive_answer(to)
            message_id = self.new_message_id(message)
            record = self.record(message, message_id)
            self.received.append(record)
            hook = self.before_answer
        if hook is not None:
            hook(message_id, record)
        return self.accepted(message_id, record)

    # --- what each provider says ---------------------------------------------------------
    def refuse(self, path: str, headers: Any) -> Answer | None:
        """The answer to a wrong path or credentials; None when the call may go on."""
        raise NotImplementedError

    def parse(self, body: bytes, headers: Any) -> dict:
        """The message as sent, with its recipient as `to`."""
        raise NotImplementedError

    def new_message_id(self, message: dict) -> str:
        raise NotImplementedError

    def record(self, message: dict, message_id: str) -> dict:
        """What `received` keeps of an accepted message."""
        return {**message, "message_id": message_id}

    def accepted(self, message_id: str, record: dict) -> Answer:
        raise NotImplementedError

    def inactive_answer(self, to: str) -> Answer:
        raise NotImplementedError(f"{self.esp} refuses no address at send")

    def event(self, kind: str, message_id: str, to: str) -> Any:
        """The webhook body the provider posts about `message_id` (kind: one of KINDS, or
        RESUBSCRIBE where the provider reports one)."""
        raise NotImplementedError

    def signed(self, body: Any, *, good: bool = True) -> WebhookPost:
        """`body` posted as the provider posts it: verifiable, or (good=False) forged."""
        raise NotImplementedError

    def anymail(self, url: str = "") -> dict[str, Any]:
        """The ANYMAIL settings that point this process at the peer (or at `url` in its
        place: a hostile server, say)."""
        raise NotImplementedError

    def env(self) -> dict[str, str]:
        """The environment that points worker processes at the peer."""
        raise NotImplementedError


def email_through(settings: Any, peer: EspPeer, **anymail: Any) -> EspPeer:
    """Point this process's email at `peer` (reset), as NOTIFY_EMAIL_ESP=<its esp> does;
    `anymail` adds settings such as WEBHOOK_SECRET. `settings` is pytest-django's."""
    peer.reset()
    settings.NOTIFY_EMAIL_ESP = peer.esp
    settings.NOTIFY_CHANNEL_PROVIDERS = {**settings.NOTIFY_CHANNEL_PROVIDERS, "email": peer.esp}
    settings.ANYMAIL = {**settings.ANYMAIL, **peer.anymail(), **anymail}
    return peer
