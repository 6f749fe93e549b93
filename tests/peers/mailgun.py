"""A Mailgun API on loopback: `POST /v3/<domain>/messages` (a form, HTTP basic
auth `api:<key>`) answered `{"id": "<...>", "message": "Queued. Thank you."}` (and its
`{"message": ...}` errors), and its webhook posts (JSON: `signature` and `event-data`),
signed as Mailgun signs them: HMAC-SHA256 of timestamp + token with the signing key.
"""

from __future__ import annotations

import hashlib
import hmac
import time
import uuid
from email.parser import BytesParser
from email.policy import HTTP
from typing import Any
from urllib.parse import parse_qs

from tests.peers.esp import SECRET, Answer, EspPeer, WebhookPost, basic_auth, json_post

API_KEY = "peer-mailgun-key"
SIGNING_KEY = "peer-webhook-signing-key"
DOMAIN = "mg.notify.localhost"


def _form(body: bytes, content_type: str) -> dict[str, str]:
    """The fields of a form body, urlencoded or (with attachments) multipart/form-data;
    the last value of each name."""
    if not content_type.startswith("multipart/"):
        return {name: values[-1] for name, values in parse_qs(body.decode()).items()}
    parsed = BytesParser(policy=HTTP).parsebytes(
        f"Content-Type: {content_type}\r\n\r\n".encode() + body
    )
    return {
        part.get_param("name", header="content-disposition"): part.get_content()
        for part in parsed.iter_parts()
    }


class MailgunPeer(EspPeer):
    esp = "mailgun"

    def refuse(self, path: str, headers: Any) -> Answer | None:
        if path.rstrip("/") != f"/v3/{DOMAIN}/messages":
            return 404, {"message": "Domain not found"}, {}
        if headers.get("Authorization") != basic_auth(f"api:{API_KEY}"):
            return 401, "Forbidden", {}
        return None

    def parse(self, body: bytes, headers: Any) -> dict:
        return _form(body, headers.get("Content-Type", ""))

    def new_message_id(self, message: dict) -> str:
        return f"<{time.strftime('%Y%m%d%H%M%S')}.{uuid.uuid4().hex[:16]}@{DOMAIN}>"

    def accepted(self, message_id: str, record: dict) -> Answer:
        return 200, {"id": message_id, "message": "Queued. Thank you."}, {}

    # --- Mailgun's error answers, to queue in `answers` ---------------------------------
    @staticmethod
    def rate_limited(wait: int = 7) -> Answer:
        return 429, {"message": "Too many requests"}, {"Retry-After": str(wait)}

    @staticmethod
    def unavailable() -> Answer:
        return 503, {"message": "Service Unavailable"}, {}

    @staticmethod
    def account_refused() -> Answer:
        return 403, {"message": (
            f"Domain {DOMAIN} is not allowed to send: Free accounts are for test purposes "
            "only. Please upgrade or add the address to authorized recipients.")}, {}  # fmt: skip

    @staticmethod
    def bad_message() -> Answer:
        return 400, {"message": "Need at least one of 'text' or 'html' parameters specified"}, {}

    @staticmethod
    def bad_address() -> Answer:
        text = "'to' parameter is not a valid address. please check documentation"
        return 400, {"message": text}, {}

    # --- webhooks ------------------------------------------------------------------------
    def event(self, kind: str, message_id: str, to: str) -> dict:
        common = {
            "id": uuid.uuid4().hex, "timestamp": time.time(), "recipient": to,
            "message": {"headers": {"message-id": message_id.strip("<>"), "to": to}},
            "tags": [], "user-variables": {},
        }  # fmt: skip
        failed = {
            "event": "failed", "reason": "bounce",
            "delivery-status": {"code": 550, "message": "5.1.1 The email account does not exist",
                                "description": "Not delivered"},
        }  # fmt: skip
        specific = {
            "delivered": {"event": "delivered",
                          "delivery-status": {"code": 250, "message": "OK", "description": ""}},
            "hard_bounce": {**failed, "severity": "permanent"},
            "soft_bounce": {**failed, "severity": "temporary", "reason": "generic"},
            "complaint": {"event": "complained"},
            # Mailgun's unsubscribe link or header; it reports no resubscribe.
            "unsubscribe": {"event": "unsubscribed", "ip": "192.0.2.1",
                            "client-info": {"user-agent": "Mozilla/5.0"}},
            "open": {"event": "opened", "client-info": {"user-agent": "Mozilla/5.0"}},
            "click": {"event": "clicked", "url": "https://example.com/o"},
        }[kind]  # fmt: skip
        return {"signature": {}, "event-data": {**common, **specific}}

    def signed(self, body: Any, *, good: bool = True) -> WebhookPost:
        """Signed with the signing key (good) or another one (forged: the basic auth a
        Mailgun webhook URL may carry too is right, so only the signature can refuse
        it); a fresh token each time."""
        stamp, token = str(int(time.time())), uuid.uuid4().hex
        key = SIGNING_KEY if good else "forged-key"
        digest = hmac.new(key.encode(), f"{stamp}{token}".encode(), hashlib.sha256).hexdigest()
        signature = {"timestamp": stamp, "token": token, "signature": digest}
        return json_post({**body, "signature": signature}, auth=SECRET)

    def anymail(self, url: str = "") -> dict[str, Any]:
        url = url or self.url
        return {
            "MAILGUN_API_KEY": API_KEY,
            "MAILGUN_API_URL": f"{url}v3",
            "MAILGUN_SENDER_DOMAIN": DOMAIN,
            "MAILGUN_WEBHOOK_SIGNING_KEY": SIGNING_KEY,
        }

    def env(self) -> dict[str, str]:
        return self.anymail()
