"""FCM mobile push through firebase-admin.

A batch of deliveries goes out together: `send_many` posts them in chunks of at most
NOTIFY_FCM_BATCH_SIZE (FCM's limit is 500), each message on its own as
`messaging.send_each` does, and returns one result per delivery. The posts run on one
pool of threads the process keeps, as many as the SDK's session keeps connections
(fcm_app.py), rather than on threads `send_each` would start and stop for every chunk:
starting them cost the sender more than the posts themselves. Every attempt reads the
device's current token by the delivery's target (the device id).

Classification: UNREGISTERED and SENDER_ID_MISMATCH mean this token is dead → permanent,
and the device is reported gone (the outcome step deactivates it); INVALID_ARGUMENT is
about the message → permanent, the device stays; quota (429), unavailable/internal
(5xx), auth and network errors → transient, with FCM's Retry-After passed on. The SDK's
own HTTP retries are turned off (deliveries/channels/fcm_app.py): they would sleep
inside a worker for the whole Retry-After.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from functools import partial
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.template import TemplateSyntaxError
from django.utils import timezone
from firebase_admin import exceptions, messaging

from deliveries.channels.base import SendResult, call_failed, refusal, ttl_left
from deliveries.channels.fcm_app import FCM_CONNECTIONS, fcm_app
from deliveries.channels.overlap import call_pool
from deliveries.models import DeviceKind
from deliveries.selectors import devices_for_targets
from templates_admin.rendering import render_version

if TYPE_CHECKING:
    from deliveries.models import Delivery, Device
    from templates_admin.models import TemplateVersion

logger = logging.getLogger(__name__)

PRIORITY_BY_QUEUE = {"high": "high", "medium": "high", "low": "normal"}
_APNS_PRIORITY = {"high": "10", "normal": "5"}


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
    devices = devices_for_targets(targets=[d.target for d, _, _ in items], kind=DeviceKind.FCM)
    results: list[SendResult | Exception | None] = [None] * len(items)
    sendable: list[tuple[int, messaging.Message]] = []
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
        sendable.append((index, _message(delivery, device, rendered)))
    size = min(settings.NOTIFY_FCM_BATCH_SIZE, 500)
    for start in range(0, len(sendable), size):
        chunk = sendable[start : start + size]
        logger.info("fcm: sending a chunk of %s messages", len(chunk))
        try:
            responses = _send_each([message for _, message in chunk])
        except (exceptions.FirebaseError, ValueError) as error:
            for index, _ in chunk:
                results[index] = call_failed(error)
            continue
        for (index, _), response in zip(chunk, responses, strict=True):
            results[index] = classify_response(response)[0]
    return [result for result in results if result is not None]


def _send_each(chunk: list[messaging.Message]) -> list[messaging.SendResponse]:
    """What `messaging.send_each` answers for `chunk`: each message posted on its own,
    here on the process's pool of FCM threads; one response each, in order. As there,
    anything but a failed post (the access token could not be had) fails the chunk."""
    pool, post = call_pool("fcm-call", FCM_CONNECTIONS), partial(_send_one, app=fcm_app())
    try:
        return list(pool.map(post, chunk))
    except Exception as error:
        raise exceptions.UnknownError(
            message=f"Unknown error while making remote service calls: {error}", cause=error
        ) from error


def _send_one(message: messaging.Message, *, app: Any) -> messaging.SendResponse:
    """One message's post, its failure kept as its response (as `send_each` keeps it). A
    message the SDK cannot encode fails alone, before anything is posted."""
    try:
        return messaging.SendResponse({"name": messaging.send(message, app=app)}, None)
    except (exceptions.FirebaseError, ValueError) as error:
        return messaging.SendResponse(None, error)


def classify_response(response: messaging.SendResponse) -> tuple[SendResult, str]:
    """(result, FCM error code) for one message of a batch; a dead token says so."""
    if response.success:
        return SendResult.delivered(provider_message_id=response.message_id or ""), ""
    error = response.exception
    code = _error_code(error)
    http = getattr(error, "http_response", None)
    result = refusal(
        kind=DeviceKind.FCM, code=code, text=str(error)[:500],
        permanent=code == "INVALID_ARGUMENT", headers=http.headers if http is not None else None,
    )  # fmt: skip
    return result, code


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
