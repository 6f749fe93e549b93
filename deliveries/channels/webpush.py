"""Web Push with VAPID, through pywebpush.

Every attempt reads the device's current subscription by the delivery's target (the
device id), so a browser that re-registered while its notification waited gets it at
the new endpoint. Classification: 2xx delivered; 404/410 (the subscription is gone) and
401/403 (it refuses our VAPID key, which it was bound to) → permanent, and the device is
reported gone (the outcome step deactivates it); 413/400 (the message is unacceptable)
and any other answer → permanent; 429 and 5xx, timeouts and connection errors →
transient, with the push service's Retry-After passed on (bounded by
NOTIFY_PUSH_RETRY_AFTER_MAX; past the delivery's deadline it expires). Requests are
signed with VAPID (deliveries/channels/vapid.py).

The endpoint came from a browser, so before each post it is checked against
WEBPUSH_ALLOWED_ORIGINS (egress/origins.py); redirects are never
followed, at most WEBPUSH_MAX_RESPONSE_BYTES of the answer is read, and the whole call
ends at NOTIFY_CALL_DEADLINE_WEBPUSH however slowly the endpoint drips its answer.

A batch's pushes are posted overlapped (`send_overlapped`): up to
NOTIFY_WEBPUSH_CONCURRENCY at once per sender, each with its own deadline and bounded
read, one person's pushes still one after the other; each is encrypted on its call
thread while the others wait for their answers.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Hashable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

import requests
from django.conf import settings
from django.template import TemplateSyntaxError
from pywebpush import WebPusher

from deliveries.channels.base import SendResult, call_failed, refusal, ttl_left
from deliveries.channels.overlap import call_pool, calls_overlapped
from deliveries.channels.vapid import vapid_headers
from deliveries.models import DeviceKind
from deliveries.selectors import device_for_delivery, devices_for_targets
from egress.origins import EndpointRefused, endpoint_check
from egress.sessions import BoundedSession, bounded_session
from templates_admin.rendering import render_version

if TYPE_CHECKING:
    from deliveries.models import Delivery, Device
    from templates_admin.models import TemplateVersion

# Category queue class → Web Push `Urgency` (RFC 8030 §5.3): OTPs wake the device.
URGENCY_BY_QUEUE = {"high": "high", "medium": "normal", "low": "low"}


def push_session() -> BoundedSession:
    """The shared session for the configured deadline and answer size, with a kept
    connection per push host for every post a process may have in flight."""
    return bounded_session(
        settings.NOTIFY_PROVIDER_CALL_DEADLINES["webpush"],
        settings.WEBPUSH_MAX_RESPONSE_BYTES,
        pool_size=settings.NOTIFY_WEBPUSH_CONCURRENCY * settings.NOTIFY_PUSH_SENDERS,
    )


class PayloadTooLarge(TemplateSyntaxError):
    """The rendered push does not fit one encrypted record; a render error, not retried."""


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
    return push_prepare(delivery, version, context, device=device)()


def calls_in_flight() -> int:
    """How many pushes one sender keeps in flight: a batch's first round sends as many."""
    return settings.NOTIFY_WEBPUSH_CONCURRENCY


def send_overlapped(
    items: Sequence[tuple[Delivery, TemplateVersion, dict[str, Any]]],
    *,
    lanes: Sequence[Hashable],
    before_each: Callable[[], object] | None = None,
) -> Iterator[tuple[int, SendResult | Exception, float]]:
    """A batch's pushes, up to NOTIFY_WEBPUSH_CONCURRENCY posted at once; yields
    (index, result or exception, seconds) as each answer comes. The devices are read in
    one query; each push is rendered here just before it goes, and encrypted and posted
    on a call thread (deliveries/channels/overlap.py keeps each lane's order)."""
    devices = devices_for_targets(
        targets=[delivery.target for delivery, _, _ in items], kind=DeviceKind.WEBPUSH
    )

    def prepare(index: int) -> Callable[[], SendResult]:
        delivery, version, context = items[index]
        return push_prepare(delivery, version, context, device=devices.get(delivery.target))

    limit = settings.NOTIFY_WEBPUSH_CONCURRENCY
    pool = call_pool("webpush-call", limit * settings.NOTIFY_PUSH_SENDERS)
    return calls_overlapped(prepare, lanes=lanes, limit=limit, pool=pool, before_each=before_each)


def push_prepare(
    delivery: Delivery, version: TemplateVersion, context: dict[str, Any], *, device: Device | None
) -> Callable[[], SendResult]:
    """Render the push (in the calling thread: a render error raises here) and return
    the call that checks the endpoint, encrypts and posts it (safe on any thread)."""
    if device is None:
        gone = SendResult.permanent(status_code="no_device", response="device gone or inactive")
        return lambda: gone
    payload = render_payload(version, context, delivery=delivery)
    urgency = URGENCY_BY_QUEUE.get(delivery.queue, "normal")
    ttl = ttl_left(delivery)
    return lambda: _post(device, payload, urgency=urgency, ttl=ttl)


def _post(device: Device, payload: bytes, *, urgency: str, ttl: int) -> SendResult:
    try:
        endpoint_check(device.endpoint)
    except EndpointRefused as refused:
        response = f"endpoint {refused.reason}"
        if refused.retryable:
            return SendResult.transient(status_code="endpoint_dns", response=response)
        return SendResult.permanent(status_code="endpoint_refused", response=response)
    headers = vapid_headers(device.endpoint)
    headers["Urgency"] = urgency
    try:
        response = WebPusher(_subscription(device), requests_session=push_session()).send(
            payload,
            headers,
            ttl=ttl,
            timeout=(settings.NOTIFY_PUSH_CONNECT_TIMEOUT, settings.NOTIFY_PUSH_REQUEST_TIMEOUT),
        )
    except requests.RequestException as error:  # a timeout (per read, or the deadline)
        return call_failed(error)
    return classify_response(response)


def classify_response(response: requests.Response) -> SendResult:
    """Map the push service's answer to an outcome (a gone subscription says so)."""
    code = response.status_code
    # The transport read at most WEBPUSH_MAX_RESPONSE_BYTES; only the start is kept.
    text = response.content[:500].decode("utf-8", "replace")
    if 200 <= code < 300:
        return SendResult.delivered(
            provider_message_id=response.headers.get("Location", "")[:255], status_code=str(code)
        )
    # Only 429 and 5xx are about the push service's health. Anything else is about this
    # message or endpoint: 400/413 (unacceptable message), a redirect (never followed: a
    # push service answers a push, it never moves it) and whatever an endpoint makes up.
    # Permanent, so a hostile endpoint can neither keep a retry loop going nor trip a
    # breaker.
    return refusal(
        kind=DeviceKind.WEBPUSH, code=str(code), text=text,
        permanent=not (code == 429 or code >= 500), headers=response.headers,
    )  # fmt: skip


def _subscription(device: Device) -> dict[str, Any]:
    return {"endpoint": device.endpoint, "keys": {"p256dh": device.p256dh, "auth": device.auth}}
