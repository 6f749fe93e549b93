"""A Postmark API on loopback: `POST /email` as Postmark answers it (its JSON, its HTTP
statuses and ErrorCodes), recording what it was sent; and the webhook bodies Postmark
posts afterwards (Delivery, Bounce, SpamComplaint, Open, Click), for a test to post.

Why Postmark: one send endpoint, one JSON answer shape with a numeric ErrorCode that
says what went wrong, and tracking webhooks authenticated by HTTP basic auth in the URL
(what anymail verifies for it) — so its real answers are few and exact to reproduce.
"""

from __future__ import annotations

import base64
import json
import threading
import uuid
from collections import deque
from collections.abc import Callable
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import requests

TOKEN = "peer-server-token"


def _now() -> str:
    return datetime.now(UTC).isoformat().replace("+00:00", "Z")


class PostmarkPeer:
    """Answers `POST /email`: 200 with a fresh MessageID, unless a scripted answer is
    queued (`answers`) or the recipient is inactive (422, ErrorCode 406)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.reset()
        peer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # quiet
                pass

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                status, answer, headers = peer.answer(self.path, dict(self.headers), body)
                data = json.dumps(answer).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for name, value in headers.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}/"

    def reset(self) -> None:
        with self.lock:
            self.received: list[dict] = []
            self.answers: deque[tuple[int, dict, dict]] = deque()
            self.inactive: set[str] = set()
            # Called with (MessageID, message) before a send is answered: a test posts
            # the provider's webhook from here to have it overtake the send's record.
            self.before_answer: Callable[[str, dict], None] | None = None

    def start(self) -> None:
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def answer(self, path: str, headers: dict, body: bytes) -> tuple[int, dict, dict]:
        if path.rstrip("/") != "/email":
            return 404, {"ErrorCode": 404, "Message": "Not found"}, {}
        if headers.get("X-Postmark-Server-Token") != TOKEN:
            return 401, {
                "ErrorCode": 10,
                "Message": "The Server Token you provided in the X-Postmark-Server-Token "
                "request header was invalid. Please verify that you are using a valid token.",
            }, {}  # fmt: skip
        message = json.loads(body)
        with self.lock:
            if self.answers:
                return self.answers.popleft()
            to = message.get("To", "")
            if to.lower() in self.inactive:
                return 422, {
                    "ErrorCode": 406,
                    "Message": "You tried to send to a recipient that has been marked as "
                    f"inactive.\nFound inactive addresses: {to.lower()}.\nInactive recipients "
                    "are ones that have generated a hard bounce or a spam complaint. ",
                }, {}  # fmt: skip
            message_id = str(uuid.uuid4())
            self.received.append({**message, "MessageID": message_id})
            hook = self.before_answer
        if hook is not None:
            hook(message_id, message)
        return 200, {
            "To": to, "SubmittedAt": _now(), "MessageID": message_id, "ErrorCode": 0,
            "Message": "OK",
        }, {}  # fmt: skip

    @staticmethod
    def post_webhook(url: str, body: dict, *, user_password: str) -> int:
        """Post a webhook body as Postmark does, to a URL carrying `user:password@` (sent
        as HTTP basic auth); the HTTP status it got."""
        scheme, _, rest = url.partition("://")
        answer = requests.post(
            f"{scheme}://{user_password}@{rest}", json=body, timeout=10, allow_redirects=False
        )
        return answer.status_code

    # --- Postmark's real error answers, to queue in `answers` ---------------------------
    @staticmethod
    def rate_limited(retry_after: int = 7) -> tuple[int, dict, dict]:
        return 429, {"ErrorCode": 429, "Message": "Rate limit exceeded."}, {
            "Retry-After": str(retry_after)
        }  # fmt: skip

    @staticmethod
    def unavailable() -> tuple[int, dict, dict]:
        return 503, {"ErrorCode": 100, "Message": "Maintenance"}, {}

    @staticmethod
    def invalid_request(text: str = "Provide either email TextBody or HtmlBody or both."):
        return 422, {"ErrorCode": 300, "Message": text}, {}

    @staticmethod
    def not_allowed_to_send() -> tuple[int, dict, dict]:
        return 422, {
            "ErrorCode": 405,
            "Message": "Not allowed to send: you have run out of credits.",
        }, {}  # fmt: skip


# --- Webhook bodies as Postmark posts them -------------------------------------------


def delivery_event(message_id: str, recipient: str) -> dict:
    return {
        "RecordType": "Delivery", "ServerID": 23, "MessageStream": "outbound",
        "MessageID": message_id, "Recipient": recipient, "Tag": "", "DeliveredAt": _now(),
        "Details": "smtp;250 2.0.0 OK", "Metadata": {},
    }  # fmt: skip


def bounce_event(message_id: str, email: str, *, kind: str = "HardBounce", event_id: int = 42):
    code, name = {"HardBounce": (1, "Hard bounce"), "SoftBounce": (4096, "Soft bounce")}[kind]
    return {
        "RecordType": "Bounce", "ID": event_id, "Type": kind, "TypeCode": code, "Name": name,
        "Tag": "", "MessageID": message_id, "ServerID": 23, "MessageStream": "outbound",
        "Description": "The server was unable to deliver your message (ex: unknown user, "
        "mailbox not found).", "Details": "smtp;550 5.1.1 The email account does not exist.",
        "Email": email, "From": "notify@localhost", "BouncedAt": _now(),
        "DumpAvailable": False, "Inactive": kind == "HardBounce", "CanActivate": True,
        "Subject": "Your order", "Metadata": {},
    }  # fmt: skip


def complaint_event(message_id: str, email: str, *, event_id: int = 43) -> dict:
    return {
        "RecordType": "SpamComplaint", "ID": event_id, "Type": "SpamComplaint",
        "TypeCode": 100001, "Name": "Spam complaint", "Tag": "", "MessageID": message_id,
        "ServerID": 23, "MessageStream": "outbound", "Description": "", "Details": "",
        "Email": email, "From": "notify@localhost", "BouncedAt": _now(),
        "DumpAvailable": False, "Inactive": True, "CanActivate": False, "Subject": "Offer",
        "Metadata": {},
    }  # fmt: skip


def open_event(message_id: str, recipient: str) -> dict:
    return {
        "RecordType": "Open", "MessageStream": "outbound", "FirstOpen": True,
        "Client": {"Name": "Firefox", "Company": "Mozilla", "Family": "Firefox"},
        "OS": {"Name": "Linux", "Company": "", "Family": "Linux"}, "Platform": "Desktop",
        "UserAgent": "Mozilla/5.0", "ReadSeconds": 5, "Geo": {}, "MessageID": message_id,
        "Metadata": {}, "ReceivedAt": _now(), "Tag": "", "Recipient": recipient,
    }  # fmt: skip


def click_event(message_id: str, recipient: str, link: str = "https://example.com/o") -> dict:
    return {
        "RecordType": "Click", "MessageStream": "outbound", "ClickLocation": "HTML",
        "Client": {}, "OS": {}, "Platform": "Desktop", "UserAgent": "Mozilla/5.0",
        "OriginalLink": link, "Geo": {}, "MessageID": message_id, "Metadata": {},
        "ReceivedAt": _now(), "Tag": "", "Recipient": recipient,
    }  # fmt: skip


def basic_auth(user_password: str) -> str:
    """The Authorization header Postmark sends for a webhook URL with user:password@."""
    return "Basic " + base64.b64encode(user_password.encode()).decode()


def email_through_peer(settings: Any, peer: PostmarkPeer, **anymail: Any) -> PostmarkPeer:
    """Point this process's email at `peer` (reset), as NOTIFY_EMAIL_ESP=postmark does;
    `anymail` adds settings such as WEBHOOK_SECRET. `settings` is pytest-django's."""
    peer.reset()
    settings.NOTIFY_EMAIL_ESP = "postmark"
    settings.NOTIFY_CHANNEL_PROVIDERS = {**settings.NOTIFY_CHANNEL_PROVIDERS, "email": "postmark"}
    settings.ANYMAIL = {
        **settings.ANYMAIL,
        "POSTMARK_SERVER_TOKEN": TOKEN,
        "POSTMARK_API_URL": peer.url,
        **anymail,
    }
    return peer
