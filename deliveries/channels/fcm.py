"""FCM mobile push through firebase-admin.

A batch of deliveries goes out together: `send_many` sends them with
`messaging.send_each` in chunks of at most NOTIFY_FCM_BATCH_SIZE (FCM's limit is 500)
and returns one result per delivery. Every attempt reads the device's current token by
the delivery's target (the device id).

Classification: UNREGISTERED and SENDER_ID_MISMATCH mean this token is dead → permanent,
and the device is deactivated (in bulk, once per batch); INVALID_ARGUMENT is about the
message → permanent, the device stays; quota (429), unavailable/internal (5xx), auth
and network errors → transient, with FCM's Retry-After passed on. The SDK's own HTTP
retries are turned off: they would sleep inside a worker for the whole Retry-After.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import firebase_admin
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.template import TemplateSyntaxError
from django.utils import timezone
from firebase_admin import credentials, exceptions, messaging

from deliveries.channels.base import SendResult, parse_retry_after, ttl_left
from deliveries.channels.deadline import BoundedAdapter
from deliveries.models import Device, DeviceKind
from deliveries.pipeline.devices import PERMANENT_DEVICE_CODES, devices_deactivate
from templates_admin.rendering import render_version

if TYPE_CHECKING:
    from deliveries.models import Delivery
    from templates_admin.models import TemplateVersion

logger = logging.getLogger(__name__)

PRIORITY_BY_QUEUE = {"high": "high", "medium": "high", "low": "normal"}
_APNS_PRIORITY = {"high": "10", "normal": "5"}

_app_lock = threading.Lock()
_apps: dict[tuple[str, str, float, float], firebase_admin.App] = {}


def _credential() -> credentials.Certificate:
    raw = settings.FCM_CREDENTIALS.strip()
    if not raw:
        raise ImproperlyConfigured("FCM_CREDENTIALS is not set (a service-account JSON file)")
    # A path (the documented form) or the JSON itself, for secrets injected as text.
    return credentials.Certificate(json.loads(raw) if raw.startswith("{") else raw)


def fcm_app() -> firebase_admin.App:
    """The firebase-admin app for the configured credentials and send URL (one per pair)."""
    key = (
        settings.FCM_CREDENTIALS,
        settings.FCM_SEND_URL,
        settings.NOTIFY_PUSH_REQUEST_TIMEOUT,
        settings.NOTIFY_PROVIDER_CALL_DEADLINES["fcm"],
    )
    with _app_lock:
        app = _apps.get(key)
        if app is None:
            app = firebase_admin.initialize_app(
                _credential(),
                options={"httpTimeout": settings.NOTIFY_PUSH_REQUEST_TIMEOUT},
                name=f"notify-{len(_apps)}",
            )
            configure_messaging(messaging._get_messaging_service(app))
            _apps[key] = app
        return app


def configure_messaging(service: Any) -> None:
    """The one place that reaches into firebase-admin's private attributes.

    It points the send URL at FCM_SEND_URL when set (an emulator or the test peer) and
    replaces the SDK's retrying HTTP adapters with non-retrying ones. The canary test
    (tests/push/test_fcm.py) fails loudly if an upgrade renames what is touched here.
    """
    current = getattr(service, "_fcm_url", None)
    if not isinstance(current, str) or "messages:send" not in current:
        raise RuntimeError(
            "firebase-admin no longer keeps its send URL in _MessagingService._fcm_url; "
            "update deliveries/channels/fcm.py:configure_messaging for this version"
        )
    if settings.FCM_SEND_URL:
        service._fcm_url = settings.FCM_SEND_URL.format(project_id=service._project_id)
    session = service._client.session
    # No retries, a total deadline per request and a bounded read of each answer.
    adapter = BoundedAdapter(
        total_seconds=settings.NOTIFY_PROVIDER_CALL_DEADLINES["fcm"],
        max_bytes=settings.NOTIFY_FCM_MAX_RESPONSE_BYTES,
        max_retries=0,
        pool_maxsize=100,
    )
    for prefix in ("http://", "https://", "https://fcm.googleapis.com"):
        session.mount(prefix, adapter)


def send(delivery: Delivery, version: TemplateVersion, context: dict[str, Any]) -> SendResult:
    """One delivery: a batch of one."""
    result = send_many([(delivery, version, context)])[0]
    if isinstance(result, Exception):
        raise result
    return result


def send_many(
    items: Sequence[tuple[Delivery, TemplateVersion, dict[str, Any]]],
) -> list[SendResult | Exception]:
    """Send each (delivery, version, context) to its device, in `send_each` chunks of at
    most NOTIFY_FCM_BATCH_SIZE (FCM's limit is 500); one classified result per item, in
    order; an item whose template failed to render has its exception instead. Each item
    is rendered on its own, so one batch may carry many notifications.
    """
    ids = [int(d.target) for d, _, _ in items if d.target.isdigit()]
    devices = {
        str(device.pk): device
        for device in Device.objects.filter(pk__in=ids, kind=DeviceKind.FCM, active=True).exclude(
            token=""
        )
    }
    results: list[SendResult | Exception | None] = [None] * len(items)
    sendable: list[tuple[int, messaging.Message, Device]] = []
    for index, (delivery, version, context) in enumerate(items):
        device = devices.get(delivery.target)
        if device is None:
            results[index] = SendResult.permanent(
                status_code="no_device", response="device gone or inactive"
            )
            continue
        try:
            rendered = render_version(version, context)
        except TemplateSyntaxError as error:  # this item's alone: the caller classifies it
            results[index] = error
            continue
        sendable.append((index, _message(delivery, device, rendered), device))
    dead: dict[int, str] = {}
    size = min(settings.NOTIFY_FCM_BATCH_SIZE, 500)
    for start in range(0, len(sendable), size):
        chunk = sendable[start : start + size]
        logger.info("fcm: sending a chunk of %s messages", len(chunk))
        try:
            batch = messaging.send_each([message for _, message, _ in chunk], app=fcm_app())
        except (exceptions.FirebaseError, ValueError) as error:
            failed = SendResult.transient(
                status_code=type(error).__name__, response=str(error)[:500]
            )
            for index, _, _ in chunk:
                results[index] = failed
            continue
        for (index, _, device), response in zip(chunk, batch.responses, strict=True):
            result, code = classify_response(response)
            results[index] = result
            if code in PERMANENT_DEVICE_CODES[DeviceKind.FCM]:
                dead[device.pk] = code
    if dead:
        devices_deactivate(kind=DeviceKind.FCM, answers=dead)
    return [result for result in results if result is not None]


def classify_response(response: messaging.SendResponse) -> tuple[SendResult, str]:
    """(result, FCM error code) for one message of a batch."""
    if response.success:
        return SendResult.delivered(provider_message_id=response.message_id or ""), ""
    error = response.exception
    code = _error_code(error)
    text = str(error)[:500]
    if code in PERMANENT_DEVICE_CODES[DeviceKind.FCM] or code == "INVALID_ARGUMENT":
        return SendResult.permanent(status_code=code, response=text), code
    http = getattr(error, "http_response", None)
    retry_after = parse_retry_after(http.headers.get("Retry-After")) if http is not None else None
    return SendResult.transient(status_code=code, response=text, retry_after=retry_after), code


def _error_code(error: Exception | None) -> str:
    if isinstance(error, messaging.UnregisteredError):
        return "UNREGISTERED"
    if isinstance(error, messaging.SenderIdMismatchError):
        return "SENDER_ID_MISMATCH"
    if isinstance(error, exceptions.FirebaseError):
        return str(error.code)
    return type(error).__name__


def _message(delivery: Delivery, device: Device, rendered: Any) -> messaging.Message:
    priority = PRIORITY_BY_QUEUE.get(delivery.queue, "high")
    ttl = ttl_left(delivery)
    return messaging.Message(
        token=device.token,
        notification=messaging.Notification(title=rendered.title, body=rendered.body),
        data={"notification_id": str(delivery.notification_id), "url": rendered.url},
        android=messaging.AndroidConfig(ttl=ttl, priority=priority),
        apns=messaging.APNSConfig(
            headers={
                "apns-priority": _APNS_PRIORITY[priority],
                "apns-expiration": str(int(timezone.now().timestamp()) + ttl),
            }
        ),
    )
