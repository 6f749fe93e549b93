"""A Postmark API on loopback: `POST /email` as Postmark answers it (its JSON, its HTTP
statuses and ErrorCodes), recording what it was sent; and the webhook bodies Postmark
posts afterwards (Delivery, Bounce, SpamComplaint, SubscriptionChange, Open, Click), for a
test to post.

Why Postmark: one send endpoint, one JSON answer shape with a numeric ErrorCode that
says what went wrong, and tracking webhooks authenticated by HTTP basic auth in the URL
(what anymail verifies for it) — so its real answers are few and exact to reproduce.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

import requests

from tests.peers.esp import Answer, EspPeer, email_through, now_iso
from tests.peers.esp import basic_auth as basic_auth  # the header Postmark sends for user:pw@

TOKEN = "peer-server-token"

_now = now_iso


class PostmarkPeer(EspPeer):
    """Answers `POST /email`: 200 with a fresh MessageID, unless a scripted answer is
    queued (`answers`) or the recipient is inactive (422, ErrorCode 406). `received`
    keeps each message as Postmark took it, with its `MessageID`."""

    esp = "postmark"

    def refuse(self, path: str, headers: Any) -> Answer | None:
        if path.rstrip("/") != "/email":
            return 404, {"ErrorCode": 404, "Message": "Not found"}, {}
        if headers.get("X-Postmark-Server-Token") != TOKEN:
            return 401, {
                "ErrorCode": 10,
                "Message": "The Server Token you provided in the X-Postmark-Server-Token "
                "request header was invalid. Please verify that you are using a valid token.",
            }, {}  # fmt: skip
        return None

    def parse(self, body: bytes, headers: Any) -> dict:
        message = json.loads(body)
        return {**message, "to": message.get("To", "")}

    def new_message_id(self, message: dict) -> str:
        return str(uuid.uuid4())

    def record(self, message: dict, message_id: str) -> dict:
        return {**message, "MessageID": message_id, "message_id": message_id}

    def inactive_answer(self, to: str) -> Answer:
        return 422, {
            "ErrorCode": 406,
            "Message": "You tried to send to a recipient that has been marked as "
            f"inactive.\nFound inactive addresses: {to.lower()}.\nInactive recipients "
            "are ones that have generated a hard bounce or a spam complaint. ",
        }, {}  # fmt: skip

    def anymail(self, url: str = "") -> dict[str, Any]:
        url = url or self.url
        return {"POSTMARK_SERVER_TOKEN": TOKEN, "POSTMARK_API_URL": url}

    def accepted(self, message_id: str, record: dict) -> Answer:
        return 200, {
            "To": record["to"], "SubmittedAt": _now(), "MessageID": message_id, "ErrorCode": 0,
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


def subscription_change_event(
    message_id: str, recipient: str, *, suppress: bool = True, reason: str = "ManualSuppression"
) -> dict:
    """The person unsubscribed by Postmark's link or header (`suppress`: Postmark adds
    the address to the stream's suppressions, reason ManualSuppression, origin Recipient),
    or was reactivated (`suppress=False`); with `reason` HardBounce or SpamComplaint, the
    suppression Postmark makes for those. No ID: each change is its own post."""
    return {
        "RecordType": "SubscriptionChange", "MessageID": message_id, "ServerID": 23,
        "MessageStream": "outbound", "ChangedAt": _now(), "Recipient": recipient,
        "Origin": "Recipient", "SuppressSending": suppress,
        "SuppressionReason": reason if suppress else None, "Tag": "", "Metadata": {},
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


def email_through_peer(settings: Any, peer: PostmarkPeer, **anymail: Any) -> PostmarkPeer:
    """Point this process's email at `peer` (reset), as NOTIFY_EMAIL_ESP=postmark does;
    `anymail` adds settings such as WEBHOOK_SECRET. `settings` is pytest-django's."""
    email_through(settings, peer, **anymail)
    return peer
