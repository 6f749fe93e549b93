"""VAPID signing for Web Push (RFC 8292): one JWT per push-service origin, reused while
valid, signed with WEBPUSH_VAPID_PRIVATE_KEY."""

from __future__ import annotations

import threading
import time
from functools import lru_cache
from urllib.parse import urlsplit

from cryptography.hazmat.primitives.serialization import load_pem_private_key
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from py_vapid import Vapid

# Re-sign this long before the JWT's expiry, so no request carries one about to lapse.
_JWT_RENEW_MARGIN = 300

_jwt_lock = threading.Lock()
_jwt_cache: dict[str, tuple[dict[str, str], float]] = {}


@lru_cache(maxsize=1)
def _vapid() -> Vapid:
    pem = settings.WEBPUSH_VAPID_PRIVATE_KEY
    if not pem:
        raise ImproperlyConfigured(
            "WEBPUSH_VAPID_PRIVATE_KEY is not set; create one with `manage.py generate_vapid_keys`"
        )
    return Vapid(private_key=load_pem_private_key(pem.encode(), password=None))


def vapid_headers(endpoint: str, *, now: float | None = None) -> dict[str, str]:
    """The VAPID Authorization header for the endpoint's origin, reused while valid.

    Signing is per push-service origin (`aud`), not per message: one JWT serves every
    push to that service until shortly before it expires.
    """
    parts = urlsplit(endpoint)
    audience = f"{parts.scheme}://{parts.netloc}"
    now = time.time() if now is None else now
    with _jwt_lock:
        cached = _jwt_cache.get(audience)
        if cached is not None and cached[1] - _JWT_RENEW_MARGIN > now:
            return dict(cached[0])
        expires = int(now) + settings.WEBPUSH_VAPID_JWT_LIFETIME
        headers = _vapid().sign(
            {"aud": audience, "exp": expires, "sub": settings.WEBPUSH_VAPID_SUBJECT}
        )
        _jwt_cache[audience] = (headers, expires)
        return dict(headers)
