"""Standard Webhooks signing: `webhook-id`, `webhook-timestamp`, `webhook-signature`.

The signature is `v1,` + base64(HMAC-SHA256(secret, "{id}.{timestamp}.{body}")), where
the secret is the bytes behind `whsec_` + base64. During a rotation the header carries
one signature per live secret, separated by spaces; a receiver accepts any of them.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets

SECRET_PREFIX = "whsec_"
SECRET_BYTES = 24


def secret_new() -> str:
    """A fresh signing secret, `whsec_` + base64 of random bytes."""
    return SECRET_PREFIX + base64.b64encode(secrets.token_bytes(SECRET_BYTES)).decode()


def signature(*, secret: str, msg_id: str, timestamp: int, body: bytes) -> str:
    """One `v1,…` signature of the message under `secret`."""
    key = base64.b64decode(secret.removeprefix(SECRET_PREFIX))
    signed = f"{msg_id}.{timestamp}.".encode() + body
    digest = hmac.new(key, signed, hashlib.sha256).digest()
    return "v1," + base64.b64encode(digest).decode()


def signed_headers(
    *, secrets_live: list[str], msg_id: str, timestamp: int, body: bytes
) -> dict[str, str]:
    """The three Standard Webhooks headers (plus the content type) for one post."""
    return {
        "content-type": "application/json",
        "webhook-id": msg_id,
        "webhook-timestamp": str(timestamp),
        "webhook-signature": " ".join(
            signature(secret=s, msg_id=msg_id, timestamp=timestamp, body=body) for s in secrets_live
        ),
    }
