"""Reads over deliveries and devices: push targets, a notification's status, and
support's timeline of a recipient."""

from __future__ import annotations

import functools
from collections.abc import Iterable
from typing import Any

from django.core.paginator import Page, Paginator
from django.db import connection
from django.db.models import OuterRef, Prefetch, Q, Subquery

from deliveries.models import Delivery, DeliveryAttempt, Device, DeviceKind, ProviderEvent
from notify.models import Notification, Producer, Recipient
from notify.rows import ModelColumns
from pgarrays import array_literal

# What "has a live subscription" means per kind, as a filter the device query carries.
_SUBSCRIBED = {
    DeviceKind.WEBPUSH: ~Q(endpoint="") & ~Q(p256dh="") & ~Q(auth=""),
    DeviceKind.FCM: ~Q(token=""),
}
# The same, for the statements written as SQL (alias `dv`).
_SUBSCRIBED_SQL = {
    DeviceKind.WEBPUSH: "dv.endpoint <> '' AND dv.p256dh <> '' AND dv.auth <> ''",
    DeviceKind.FCM: "dv.token <> ''",
}


def push_targets_by_channel(*, recipient_id: int, channels: Iterable[str]) -> dict[str, list[str]]:
    """Device ids of the recipient's live subscriptions, per push channel asked for.

    One query for every channel; the subscription test is part of it, so a device with
    nothing to push to never gets a job, and there is no second look that could
    disagree with the first. No push channel asked for → no query.
    """
    found = push_targets_by_recipient(recipient_ids=[recipient_id], channels=channels)
    return found.get(recipient_id, {channel: [] for channel in channels if channel in _SUBSCRIBED})


def push_targets_by_recipient(
    *, recipient_ids: Iterable[int], channels: Iterable[str]
) -> dict[int, dict[str, list[str]]]:
    """`push_targets_by_channel` for many recipients in one query: recipient id → push
    channel → device ids (a recipient without devices is missing)."""
    wanted = [channel for channel in dict.fromkeys(channels) if channel in _SUBSCRIBED]
    recipients = list(dict.fromkeys(recipient_ids))
    if not wanted or not recipients:
        return {}
    targets: dict[int, dict[str, list[str]]] = {}
    with connection.cursor() as cursor:
        cursor.execute(_push_targets_sql(tuple(sorted(wanted))),
                       {"ids": array_literal(recipients)})  # fmt: skip
        rows = cursor.fetchall()
    for recipient_id, kind, pk in rows:
        by_channel = targets.setdefault(recipient_id, {channel: [] for channel in wanted})
        by_channel[kind].append(str(pk))
    return targets


@functools.cache
def _push_targets_sql(kinds: tuple[str, ...]) -> str:
    """`push_targets_by_recipient`'s statement for these kinds, written once (see
    notify/rows.py): every route reads its recipients' devices, and building the query
    cost the router more than running it. The conditions are `_SUBSCRIBED`'s."""
    subscribed = " OR ".join(
        f"(dv.kind = '{DeviceKind(kind).value}' AND {_SUBSCRIBED_SQL[kind]})" for kind in kinds
    )
    return f"""
    SELECT dv.recipient_id, dv.kind, dv.id FROM deliveries_device dv
     WHERE dv.recipient_id = ANY(%(ids)s::bigint[]) AND dv.active AND ({subscribed})
     ORDER BY dv.id
"""


def push_targets(*, recipient: Recipient, channel: str) -> list[str]:
    """Device ids of the recipient's live subscriptions for one push channel."""
    found = push_targets_by_channel(recipient_id=recipient.pk, channels=[channel])
    return found.get(channel, [])


def device_for_delivery(*, target: str, kind: str) -> Device | None:
    """The device a push delivery targets, read fresh at each attempt.

    None when it is gone, deactivated or no longer subscribed.
    """
    if not target.isdigit():
        return None
    return (
        Device.objects.filter(_SUBSCRIBED[kind], pk=int(target), kind=kind, active=True)
        .only("pk", "kind", "endpoint", "p256dh", "auth", "token", "platform")
        .first()
    )


_DEVICE = ModelColumns(Device, "dv")
# `devices_for_targets`'s statement per kind, written once (see notify/rows.py): a push
# batch reads its devices every round, and building the query cost the sender more than
# running it. The conditions are `_SUBSCRIBED`'s.
_DEVICES_SQL = {
    kind: f"""
    SELECT {_DEVICE.sql} FROM deliveries_device dv
     WHERE dv.id = ANY(%(ids)s::bigint[]) AND dv.kind = %(kind)s AND dv.active AND {subscribed}
"""
    for kind, subscribed in _SUBSCRIBED_SQL.items()
}


def devices_for_targets(*, targets: Iterable[str], kind: str) -> dict[str, Device]:
    """The devices a batch of push deliveries targets, by target, read fresh in one
    query; a target that is gone, deactivated or no longer subscribed is left out."""
    ids = {int(target) for target in targets if target.isdigit()}
    if not ids:
        return {}
    with connection.cursor() as cursor:
        cursor.execute(_DEVICES_SQL[kind], {"ids": array_literal(ids), "kind": kind})
        devices = [_DEVICE.build(row) for row in cursor.fetchall()]
    return {str(device.pk): device for device in devices}


def notification_status(*, producer: Producer, notification_id: Any) -> dict[str, Any] | None:
    """Per channel and target: status, reason, attempts, last error, template version."""
    notification = (
        Notification.objects.filter(pk=notification_id, producer=producer)
        .select_related("category")
        .first()
    )
    if notification is None:
        return None
    last_held = DeliveryAttempt.objects.filter(delivery=OuterRef("pk")).order_by("-number")
    deliveries = (
        Delivery.objects.filter(notification=notification)
        .select_related("template_version")
        .annotate(held_ms=Subquery(last_held.values("held_ms")[:1]))
    )
    return {
        "notification_id": notification.pk,
        "category": notification.category.key,
        "created_at": notification.created_at,
        "occurred_at": notification.occurred_at,
        "subject": notification.subject,
        "send_at": notification.send_at,
        "cancelled_at": notification.cancelled_at,
        "deliveries": [
            {
                "channel": delivery.channel,
                "target": delivery.target,
                "status": delivery.status,
                "reason": delivery.reason,
                "attempts": delivery.attempts,
                "last_error": delivery.last_error,
                "template_version": (
                    delivery.template_version.number if delivery.template_version else None
                ),
                "next_attempt_at": delivery.next_attempt_at,
                "held_ms": delivery.held_ms or 0,
                "created_at": delivery.created_at,
                "updated_at": delivery.updated_at,
            }
            for delivery in deliveries.order_by("pk")
        ],
    }


def recipient_timeline(*, recipient: Recipient, page: Any, per_page: int) -> Page:
    """One page of a recipient's notifications, newest first, with every delivery,
    attempt and provider event (delivered, bounced, complained, opened, clicked) loaded
    in a fixed number of queries (support's "what did they get?")."""
    deliveries = Delivery.objects.select_related("template_version__template").prefetch_related(
        Prefetch("attempt_log", queryset=DeliveryAttempt.objects.order_by("number")),
        Prefetch("provider_events", queryset=ProviderEvent.objects.order_by("received_at", "pk")),
    )
    notifications = (
        Notification.objects.filter(recipient=recipient)
        .select_related("category", "producer")
        .prefetch_related(Prefetch("deliveries", queryset=deliveries.order_by("pk")))
        .order_by("-created_at", "-pk")
    )
    return Paginator(notifications, per_page).get_page(page)
