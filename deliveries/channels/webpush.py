"""Web Push with VAPID, through pywebpush.

Every attempt reads the device's current subscription by the delivery's target (the
device id), so a browser that re-registered while its notification waited gets it at
the new endpoint. Classification: 2xx delivered; 404/410 (the subscription is gone) and
401/403 (it refuses our VAPID key, which it was bound to) → permanent, and the device is
deactivated; 413/400 the message is unacceptable → permanent; 429 and 5xx, timeouts and
connection errors → transient, with the push service's Retry-After passed on (bounded
by NOTIFY_PUSH_RETRY_AFTER_MAX; past the delivery's deadline it expires).

The endpoint came from a browser, so before each post it is checked against
WEBPUSH_ALLOWED_ORIGINS (deliveries/channels/push_origins.py); redirects are never
followed, at most WEBPUSH_MAX_RESPONSE_BYTES of the answer is read, and the whole call
ends at NOTIFY_CALL_DEADLINE_WEBPUSH however slowly the endpoint drips its answer.
"""

from __future__ import annotations

import json
import threading
import time
from functools import lru_cache
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import requests
from cryptography.hazmat.primitives.serialization import load_pem_private_key
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.template import TemplateSyntaxError
from py_vapid import Vapid
from pywebpush import WebPusher

from deliveries.channels.base import SendResult, parse_retry_after, ttl_left
from deliveries.channels.deadline import BoundedAdapter
from deliveries.channels.push_origins import EndpointRefused, endpoint_check
from deliveries.models import DeviceKind
from deliveries.pipeline.devices import PERMANENT_DEVICE_CODES, devices_deactivate
from deliveries.selectors import device_for_delivery
from templates_admin.rendering import render_version

if TYPE_CHECKING:
    from deliveries.models import Delivery, Device
    from templates_admin.models import TemplateVersion

# Category queue class → Web Push `Urgency` (RFC 8030 §5.3): OTPs wake the device.
URGENCY_BY_QUEUE = {"high": "high", "medium": "normal", "low": "low"}
# Re-sign this long before the JWT's expiry, so no request carries one about to lapse.
_JWT_RENEW_MARGIN = 300


class _PushSession(requests.Session):
    """A session that follows no redirect, with a total deadline and a bounded read.

    pywebpush posts through `requests_session.post` and then reads `response.text`, so
    both bounds hold inside the transport (`BoundedAdapter`): the body is read there, at
    most WEBPUSH_MAX_RESPONSE_BYTES of it, before the deadline.
    """

    def __init__(self, *, total_seconds: float, max_bytes: int) -> None:
        super().__init__()
        self.trust_env = False  # no proxy from the environment: we post only where allowed
        adapter = BoundedAdapter(total_seconds=total_seconds, max_bytes=max_bytes)
        self.mount("http://", adapter)
        self.mount("https://", adapter)

    def request(self, method, url, *args, **kwargs) -> requests.Response:
        kwargs["allow_redirects"] = False
        return super().request(method, url, *args, **kwargs)


@lru_cache(maxsize=4)
def _session_for(total_seconds: float, max_bytes: int) -> _PushSession:
    return _PushSession(total_seconds=total_seconds, max_bytes=max_bytes)


def push_session() -> _PushSession:
    """The shared session for the configured deadline and answer size."""
    return _session_for(
        settings.NOTIFY_PROVIDER_CALL_DEADLINES["webpush"], settings.WEBPUSH_MAX_RESPONSE_BYTES
    )


_jwt_lock = threading.Lock()
_jwt_cache: dict[str, tuple[dict[str, str], float]] = {}


class PayloadTooLarge(TemplateSyntaxError):
    """The rendered push does not fit one encrypted record; a render error, not retried."""


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


def render_payload(
    version: TemplateVersion, context: dict[str, Any], *, delivery: Delivery
) -> bytes:
    """The JSON the service worker receives; refused when it exceeds one record."""
    message = render_version(version, context)
    payload = json.dumps(
        {
            "notification_id": str(delivery.notification_id),
            "category": delivery.notification.category.key,
            "title": message.title,
            "body": message.body,
            "url": message.url,
        },
        ensure_ascii=False,
        separators=(",", ":"),
    ).encode()
    limit = settings.WEBPUSH_MAX_PAYLOAD_BYTES
    if len(payload) > limit:
        raise PayloadTooLarge(f"push payload is {len(payload)} bytes; the limit is {limit}")
    return payload


def send(delivery: Delivery, version: TemplateVersion, context: dict[str, Any]) -> SendResult:
    """Encrypt the rendered push for the device's current subscription and post it."""
    device = device_for_delivery(target=delivery.target, kind=DeviceKind.WEBPUSH)
    if device is None:
        return SendResult.permanent(status_code="no_device", response="device gone or inactive")
    try:
        endpoint_check(device.endpoint)
    except EndpointRefused as refused:
        response = f"endpoint {refused.reason}"
        if refused.retryable:
            return SendResult.transient(status_code="endpoint_dns", response=response)
        return SendResult.permanent(status_code="endpoint_refused", response=response)
    payload = render_payload(version, context, delivery=delivery)
    headers = vapid_headers(device.endpoint)
    headers["Urgency"] = URGENCY_BY_QUEUE.get(delivery.queue, "normal")
    try:
        response = WebPusher(_subscription(device), requests_session=push_session()).send(
            payload,
            headers,
            ttl=ttl_left(delivery),
            timeout=(settings.NOTIFY_PUSH_CONNECT_TIMEOUT, settings.NOTIFY_PUSH_REQUEST_TIMEOUT),
        )
    except requests.Timeout as error:  # per read, or the call's total deadline
        return SendResult.transient(status_code="timeout", response=str(error)[:500])
    except requests.RequestException as error:
        return SendResult.transient(status_code=type(error).__name__, response=str(error)[:500])
    return classify_response(response, device=device)


def classify_response(response: requests.Response, *, device: Device) -> SendResult:
    """Map the push service's answer to an outcome; deactivate a gone subscription."""
    code = response.status_code
    # The transport read at most WEBPUSH_MAX_RESPONSE_BYTES; only the start is kept.
    text = response.content[:500].decode("utf-8", "replace")
    if 200 <= code < 300:
        return SendResult.delivered(
            provider_message_id=response.headers.get("Location", "")[:255], status_code=str(code)
        )
    if str(code) in PERMANENT_DEVICE_CODES[DeviceKind.WEBPUSH]:
        devices_deactivate(kind=DeviceKind.WEBPUSH, answers={device.pk: str(code)})
        return SendResult.permanent(status_code=str(code), response=text)
    if code == 429 or code >= 500:
        return SendResult.transient(
            status_code=str(code),
            response=text,
            retry_after=parse_retry_after(response.headers.get("Retry-After")),
        )
    # Any other answer is about this message or this endpoint, not the push service's
    # health: 400/413 (unacceptable message), a redirect (never followed: a push service
    # answers a push, it never moves it) and whatever else an endpoint makes up. Permanent,
    # so a hostile endpoint can neither keep a retry loop going nor trip a breaker.
    return SendResult.permanent(status_code=str(code), response=text)


def _subscription(device: Device) -> dict[str, Any]:
    return {"endpoint": device.endpoint, "keys": {"p256dh": device.p256dh, "auth": device.auth}}
