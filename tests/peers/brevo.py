"""A Brevo API on loopback: `POST /v3/smtp/email` (header `api-key`) answered 201
`{"messageId": "<...>"}` (and its `{"code", "message"}` errors), and its transactional
webhook posts (one JSON event each), authenticated by HTTP basic auth in the URL.
"""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

from tests.peers.esp import FORGED, SECRET, Answer, EspPeer, WebhookPost, json_post, now_iso

API_KEY = "xkeysib-peer-api-key"


class BrevoPeer(EspPeer):
    esp = "brevo"

    def refuse(self, path: str, headers: Any) -> Answer | None:
        if path.rstrip("/") != "/v3/smtp/email":
            return 404, {"code": "not_found", "message": "Invalid route"}, {}
        if headers.get("api-key") != API_KEY:
            return 401, {"code": "unauthorized", "message": "Key not found"}, {}
        return None

    def parse(self, body: bytes, headers: Any) -> dict:
        message = json.loads(body)
        return {**message, "to": message["to"][0]["email"]}

    def new_message_id(self, message: dict) -> str:
        return f"<{time.strftime('%Y%m%d%H%M%S')}.{uuid.uuid4().int % 10**12}@smtp-relay.mailin.fr>"

    def accepted(self, message_id: str, record: dict) -> Answer:
        return 201, {"messageId": message_id}, {}

    # --- Brevo's error answers, to queue in `answers` -----------------------------------
    @staticmethod
    def rate_limited(wait: int = 7) -> Answer:
        return 429, {"code": "too_many_requests", "message": "Too many requests"}, {
            "x-sib-ratelimit-limit": "1000", "x-sib-ratelimit-remaining": "0",
            "x-sib-ratelimit-reset": str(wait),
        }  # fmt: skip

    @staticmethod
    def unavailable() -> Answer:
        return 503, {"code": "service_unavailable", "message": "Service unavailable"}, {}

    @staticmethod
    def account_refused() -> Answer:
        return 402, {"code": "not_enough_credits", "message": "Not enough credits"}, {}

    @staticmethod
    def bad_message() -> Answer:
        return 400, {"code": "missing_parameter", "message": "subject is missing"}, {}

    @staticmethod
    def bad_address() -> Answer:
        return 400, {"code": "invalid_parameter", "message": "email is not valid in to"}, {}

    # --- webhooks ------------------------------------------------------------------------
    def event(self, kind: str, message_id: str, to: str) -> dict:
        epoch_ms = int(time.time() * 1000)
        common = {
            "id": 123456, "email": to, "message-id": message_id, "date": now_iso(),
            "ts": epoch_ms // 1000, "ts_event": epoch_ms // 1000, "ts_epoch": epoch_ms,
            "subject": "Your order", "tag": "", "sending_ip": "192.0.2.10",
        }  # fmt: skip
        specific = {
            "delivered": {"event": "delivered"},
            "hard_bounce": {"event": "hard_bounce",
                            "reason": "550 5.1.1 The email account does not exist."},
            "soft_bounce": {"event": "soft_bounce", "reason": "452 4.2.2 Mailbox full"},
            "complaint": {"event": "spam"},
            # Brevo's unsubscribe link; its transactional webhook reports no resubscribe.
            "unsubscribe": {"event": "unsubscribe", "user_agent": "Mozilla/5.0",
                            "device_used": "DESKTOP"},
            "open": {"event": "unique_opened"},
            "click": {"event": "click", "link": "https://example.com/o"},
        }[kind]  # fmt: skip
        return {**common, **specific}

    def signed(self, body: Any, *, good: bool = True) -> WebhookPost:
        return json_post(body, auth=SECRET if good else FORGED)

    def anymail(self, url: str = "") -> dict[str, Any]:
        url = url or self.url
        return {"BREVO_API_KEY": API_KEY, "BREVO_API_URL": f"{url}v3/"}

    def env(self) -> dict[str, str]:
        return self.anymail()
