"""A SendGrid v3 API on loopback: `POST /v3/mail/send` answered 202 with an X-Message-Id
header (and its JSON `errors` answers), and its Event Webhook posts (a JSON list of
events), signed as SendGrid's signed Event Webhook signs them: ECDSA P-256 over the
timestamp header followed by the body, with the peer's own key pair.

anymail gives each message its own id (`anymail_id`, in the personalization's custom
args): SendGrid's events carry it back, and it is the id a delivery keeps.
"""

from __future__ import annotations

import base64
import json
import time
import uuid
from typing import Any

from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec

from tests.peers.esp import SECRET, Answer, EspPeer, WebhookPost, basic_auth

API_KEY = "SG.peer-api-key"


def _public_key(key: ec.EllipticCurvePrivateKey) -> str:
    """The public key as SendGrid's settings page shows it: base64 of the DER."""
    der = key.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return base64.b64encode(der).decode()


def _errors(status: int, field: str | None, message: str, **headers: str) -> Answer:
    """An error answer as SendGrid gives it."""
    return status, {"errors": [{"field": field, "help": None, "message": message}]}, headers


class SendGridPeer(EspPeer):
    esp = "sendgrid"
    resubscribes = True  # group_resubscribe

    def __init__(self) -> None:
        super().__init__()
        self.key = ec.generate_private_key(ec.SECP256R1())
        self.verification_key = _public_key(self.key)
        self.forger = ec.generate_private_key(ec.SECP256R1())

    def refuse(self, path: str, headers: Any) -> Answer | None:
        if path.rstrip("/") != "/v3/mail/send":
            return _errors(404, None, "resource not found")
        if headers.get("Authorization") != f"Bearer {API_KEY}":
            return _errors(
                401, None, "The provided authorization grant is invalid, expired, or revoked"
            )
        return None

    def parse(self, body: bytes, headers: Any) -> dict:
        message = json.loads(body)
        [personalization] = message["personalizations"]
        return {
            **message,
            "to": personalization["to"][0]["email"],
            "anymail_id": personalization.get("custom_args", {}).get("anymail_id", ""),
        }

    def new_message_id(self, message: dict) -> str:
        return message["anymail_id"]  # what anymail keeps (SendGrid's own is below)

    def accepted(self, message_id: str, record: dict) -> Answer:
        return 202, None, {"X-Message-Id": uuid.uuid4().hex[:22]}

    # --- SendGrid's error answers, to queue in `answers` --------------------------------
    @staticmethod
    def rate_limited(wait: int = 7) -> Answer:
        reset = str(int(time.time()) + wait)
        limits = {"X-RateLimit-Limit": "600", "X-RateLimit-Remaining": "0"}
        return _errors(429, None, "too many requests", **limits, **{"X-RateLimit-Reset": reset})

    @staticmethod
    def unavailable() -> Answer:
        return _errors(503, None, "Service Unavailable")

    @staticmethod
    def account_refused() -> Answer:
        return _errors(403, "from", "The from address does not match a verified Sender Identity.")

    @staticmethod
    def bad_message() -> Answer:
        return _errors(
            400,
            "content",
            "Unless a valid template_id is provided, the content parameter is required.",
        )

    @staticmethod
    def bad_address() -> Answer:
        return _errors(400, "personalizations.0.to.0.email", "Does not contain a valid address.")

    # --- Event Webhook -------------------------------------------------------------------
    def event(self, kind: str, message_id: str, to: str) -> list[dict]:
        common = {
            "email": to, "timestamp": int(time.time()), "anymail_id": message_id,
            "sg_event_id": uuid.uuid4().hex, "sg_message_id": f"{message_id}.filter0001",
            "smtp-id": f"<{message_id}@notify.localhost>",
        }  # fmt: skip
        specific = {
            "delivered": {"event": "delivered", "response": "250 2.0.0 OK"},
            "hard_bounce": {"event": "bounce", "type": "bounce", "status": "5.1.1",
                            "reason": "550 5.1.1 The email account does not exist.",
                            "bounce_classification": "Invalid Address"},
            "soft_bounce": {"event": "bounce", "type": "blocked", "status": "4.2.2",
                            "reason": "452 4.2.2 Mailbox full",
                            "bounce_classification": "Mailbox Unavailable"},
            "complaint": {"event": "spamreport"},
            # The person left the unsubscribe group of SendGrid's link (a global
            # `unsubscribe` reads the same to anymail); `group_resubscribe` is their return.
            "unsubscribe": {"event": "group_unsubscribe", "asm_group_id": 10,
                            "useragent": "Mozilla/5.0", "ip": "192.0.2.1",
                            "url": "https://sendgrid.example/unsubscribe"},
            "resubscribe": {"event": "group_resubscribe", "asm_group_id": 10,
                            "useragent": "Mozilla/5.0", "ip": "192.0.2.1",
                            "url": "https://sendgrid.example/resubscribe"},
            "open": {"event": "open", "useragent": "Mozilla/5.0", "ip": "192.0.2.1"},
            "click": {"event": "click", "url": "https://example.com/o",
                      "useragent": "Mozilla/5.0", "ip": "192.0.2.1"},
        }[kind]  # fmt: skip
        return [{**common, **specific}]

    def signed(self, body: Any, *, good: bool = True) -> WebhookPost:
        """Signed with the peer's key (good) or another one (forged: the basic auth is
        right, so only the signature can refuse it)."""
        data = json.dumps(body).encode()
        stamp = str(int(time.time()))
        key = self.key if good else self.forger
        signature = key.sign(stamp.encode() + data, ec.ECDSA(hashes.SHA256()))
        headers = {
            "Authorization": basic_auth(SECRET),
            "X-Twilio-Email-Event-Webhook-Signature": base64.b64encode(signature).decode(),
            "X-Twilio-Email-Event-Webhook-Timestamp": stamp,
        }
        return WebhookPost(data, headers)

    def anymail(self, url: str = "") -> dict[str, Any]:
        url = url or self.url
        return {
            "SENDGRID_API_KEY": API_KEY,
            "SENDGRID_API_URL": f"{url}v3/",
            "SENDGRID_TRACKING_WEBHOOK_VERIFICATION_KEY": self.verification_key,
        }

    def env(self) -> dict[str, str]:
        return {
            "SENDGRID_API_KEY": API_KEY,
            "SENDGRID_API_URL": f"{self.url}v3/",
            "SENDGRID_WEBHOOK_VERIFICATION_KEY": self.verification_key,
        }
