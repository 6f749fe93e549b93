"""Writes of the core domain: keys, recipients, intake, the outbox, routing and the feed."""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import F
from django.utils import timezone

from notify.broker import publish_task
from notify.models import (
    ApiKey,
    Category,
    Channel,
    FeedEntry,
    Notification,
    Outbox,
    Producer,
    Recipient,
)
from notify.unread import unread_decrement, unread_increment

logger = logging.getLogger(__name__)

ROUTE_TASK = "notify.route"
API_KEY_PREFIX = "nk"


# --- API keys -------------------------------------------------------------------------


def _hash_key(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


@dataclass(frozen=True)
class IssuedKey:
    api_key: ApiKey
    key: str  # shown once; only its hash is stored


def api_key_issue(*, producer_name: str, category_keys: list[str] | None = None) -> IssuedKey:
    """A new key for the producer (created if new). No categories given → all categories."""
    with transaction.atomic():
        producer, _ = Producer.objects.get_or_create(name=producer_name)
        prefix = secrets.token_hex(6)
        key = f"{API_KEY_PREFIX}_{prefix}_{secrets.token_urlsafe(32)}"
        api_key = ApiKey.objects.create(
            producer=producer,
            prefix=prefix,
            key_hash=_hash_key(key),
            all_categories=not category_keys,
        )
        if category_keys:
            categories = list(Category.objects.filter(key__in=category_keys))
            missing = set(category_keys) - {category.key for category in categories}
            if missing:
                raise ValueError(f"unknown categories: {', '.join(sorted(missing))}")
            api_key.categories.set(categories)
    return IssuedKey(api_key=api_key, key=key)


def api_key_authenticate(*, key: str) -> ApiKey | None:
    """The active key matching `key`, or None. Constant-time hash comparison."""
    parts = key.split("_")
    if len(parts) < 3 or parts[0] != API_KEY_PREFIX:
        return None
    api_key = (
        ApiKey.objects.select_related("producer")
        .filter(prefix=parts[1], revoked_at__isnull=True)
        .first()
    )
    if api_key is None or not hmac.compare_digest(api_key.key_hash, _hash_key(key)):
        return None
    return api_key


def api_key_revoke(*, api_key: ApiKey) -> None:
    ApiKey.objects.filter(pk=api_key.pk, revoked_at__isnull=True).update(revoked_at=timezone.now())


def api_key_may_send(*, api_key: ApiKey, category: Category) -> bool:
    return api_key.all_categories or api_key.categories.filter(pk=category.pk).exists()


# --- Recipients -----------------------------------------------------------------------


def recipient_upsert(*, user_id: str, fields: dict[str, str]) -> tuple[Recipient, bool]:
    """Create or update a recipient's contact data; returns (recipient, created)."""
    recipient, created = Recipient.objects.get_or_create(user_id=user_id, defaults=fields)
    if not created and fields:
        for name, value in fields.items():
            setattr(recipient, name, value)
        recipient.save(update_fields=[*fields, "updated_at"])
    return recipient, created


# --- Intake ---------------------------------------------------------------------------


class IntakeConflict(Exception):
    """The event id was used before with a different body."""

    def __init__(self, notification: Notification) -> None:
        super().__init__(f"event_id already used with a different body ({notification.pk})")
        self.notification = notification


def request_fingerprint(
    *,
    user_id: str,
    category: str,
    payload: dict[str, Any],
    channels: list[str] | None,
    ttl_seconds: int | None,
) -> str:
    """A stable hash of what was asked, to tell an honest retry from a conflicting reuse."""
    canonical = json.dumps(
        {
            "user_id": user_id,
            "category": category,
            "payload": payload,
            "channels": channels,
            "ttl_seconds": ttl_seconds,
        },
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
    )
    return hashlib.sha256(canonical.encode()).hexdigest()


@dataclass(frozen=True)
class Accepted:
    notification: Notification
    created: bool


def notification_accept(
    *,
    producer: Producer,
    event_id: str,
    recipient: Recipient,
    category: Category,
    payload: dict[str, Any],
    channels: list[str] | None,
    ttl_seconds: int | None,
) -> Accepted:
    """Store the notification and its outbox row in one transaction (R-IN1, R-IN2).

    The same (producer, event_id) again returns the stored notification; with another
    body it raises IntakeConflict. The route task is published after commit.
    """
    fingerprint = request_fingerprint(
        user_id=recipient.user_id,
        category=category.key,
        payload=payload,
        channels=channels,
        ttl_seconds=ttl_seconds,
    )
    try:
        with transaction.atomic():
            notification = Notification.objects.create(
                producer=producer,
                event_id=event_id,
                recipient=recipient,
                category=category,
                payload=payload,
                channels=channels,
                ttl_seconds=ttl_seconds,
                fingerprint=fingerprint,
            )
            outbox = Outbox.objects.create(notification=notification, queue=category.queue)
            transaction.on_commit(lambda: outbox_publish(outbox=outbox))
    except IntegrityError:
        # A concurrent or earlier request stored it first; its commit is visible now.
        notification = Notification.objects.get(producer=producer, event_id=event_id)
        if notification.fingerprint != fingerprint:
            raise IntakeConflict(notification) from None
        return Accepted(notification, created=False)
    return Accepted(notification, created=True)


def outbox_publish(*, outbox: Outbox) -> bool:
    """Publish the route task for an outbox row and mark it published (confirmed)."""
    try:
        publish_task(
            ROUTE_TASK,
            args=[str(outbox.notification_id)],
            queue=outbox.queue,
            priority=settings.NOTIFY_PRIORITY_FIRST_ATTEMPT,
        )
    except Exception:  # the broker is away: the row stays unpublished for the sweeper
        logger.exception("outbox %s: publish failed; the sweeper will retry", outbox.pk)
        Outbox.objects.filter(pk=outbox.pk).update(publish_attempts=F("publish_attempts") + 1)
        return False
    Outbox.objects.filter(pk=outbox.pk).update(
        published_at=timezone.now(), publish_attempts=F("publish_attempts") + 1
    )
    return True


def outbox_republish_stale() -> int:
    """Beat: publish outbox rows left unpublished (a crash between commit and publish)."""
    cutoff = timezone.now() - timedelta(seconds=settings.NOTIFY_OUTBOX_REPUBLISH_AFTER)
    published = 0
    with transaction.atomic():
        stale = list(
            Outbox.objects.select_for_update(skip_locked=True)
            .filter(published_at__isnull=True, created_at__lte=cutoff)
            .order_by("created_at")
            .only("pk", "notification_id", "queue")[: settings.NOTIFY_OUTBOX_SWEEP_BATCH]
        )
        for outbox in stale:
            published += outbox_publish(outbox=outbox)
    if stale:
        logger.warning("outbox sweeper published %s of %s stale rows", published, len(stale))
    return published


# --- Routing --------------------------------------------------------------------------


def notification_route(*, notification_id: str, now: datetime | None = None) -> list[int]:
    """Run the gate and create the deliveries; send in-app at once, enqueue the rest.

    Safe to run twice: deliveries are unique per (notification, channel, target), and
    any still `queued` are enqueued again (the sender's claim drops duplicates).
    """
    from deliveries.models import Delivery, DeliveryStatus
    from preferences.gate import decide_deliveries

    now = now or timezone.now()  # an argument so the gate's clock can be shown in tests
    with transaction.atomic():
        notification = (
            Notification.objects.select_for_update(of=("self",))
            .select_related("recipient", "category")
            .get(pk=notification_id)
        )
        if notification.routed_at is None:
            _deliveries_create(notification, decide_deliveries(notification, now=now), now)
            notification.routed_at = now
            notification.save(update_fields=["routed_at"])
        queued = list(
            Delivery.objects.filter(
                notification=notification, status=DeliveryStatus.QUEUED
            ).values_list("pk", "channel", "queue")
        )
    return _deliveries_start(queued)


def notification_fallback(*, notification_id: str, failed_channel: str) -> list[int]:
    """After a delivery on `failed_channel` ended dead, try the category's fallback
    channel — through the gate, like any delivery. Returns the deliveries started."""
    from deliveries.models import Delivery, DeliveryStatus
    from preferences.gate import decide_deliveries

    now = timezone.now()
    with transaction.atomic():
        notification = (
            Notification.objects.select_for_update(of=("self",))
            .select_related("recipient", "category")
            .get(pk=notification_id)
        )
        fallback = notification.category.fallback_channel
        if not fallback or fallback == failed_channel:
            return []
        decisions = decide_deliveries(notification, now=now, channels=[fallback])
        _deliveries_create(notification, decisions, now)
        queued = list(
            Delivery.objects.filter(
                notification=notification, channel=fallback, status=DeliveryStatus.QUEUED
            ).values_list("pk", "channel", "queue")
        )
    logger.info(
        "notification %s: %s ended dead, falling back to %s", notification_id, failed_channel,
        fallback,
    )  # fmt: skip
    return _deliveries_start(queued)


def _deliveries_create(notification: Notification, decisions, now: datetime) -> None:
    """One sealed delivery row per gate decision (existing ones are left alone)."""
    from deliveries.models import Delivery
    from preferences.gate import gate_seal

    Delivery.objects.bulk_create(
        [
            Delivery(
                notification=notification,
                channel=decision.channel,
                target=decision.target,
                queue=notification.category.queue,
                status=decision.status,
                reason=decision.reason,
                next_attempt_at=decision.not_before or (now if decision.allowed else None),
                deadline=_deadline(notification, decision.channel, now),
                finished_at=None if decision.allowed or decision.not_before else now,
                gate_seal=gate_seal(
                    notification_id=notification.pk,
                    channel=decision.channel,
                    target=decision.target,
                ),
            )
            for decision in decisions
        ],
        ignore_conflicts=True,
    )


def _deliveries_start(queued: list[tuple[int, str, str]]) -> list[int]:
    """In-app is written at once (the feed row is the delivery); the rest are enqueued."""
    from deliveries.services import delivery_attempt, delivery_enqueue

    for delivery_id, channel, queue in queued:
        if channel == Channel.INAPP:
            delivery_attempt(delivery_id=delivery_id)
        else:
            delivery_enqueue(delivery_id=delivery_id, channel=channel, queue=queue)
    return [delivery_id for delivery_id, _, _ in queued]


def _deadline(notification: Notification, channel: str, now):
    if channel == Channel.EMAIL:
        return now + timedelta(seconds=settings.NOTIFY_EMAIL_DEADLINE_SECONDS)
    if channel in (Channel.WEBPUSH, Channel.FCM):
        ttl = (
            notification.ttl_seconds
            or notification.category.ttl_seconds
            or settings.NOTIFY_DEFAULT_TTL_SECONDS
        )
        return notification.created_at + timedelta(seconds=ttl)
    return None


# --- Feed -----------------------------------------------------------------------------


def feed_entry_create(*, notification: Notification, title: str, body: str, url: str) -> FeedEntry:
    """The notification's feed entry (one per notification); counted unread once."""
    entry, created = FeedEntry.objects.get_or_create(
        notification=notification,
        defaults={
            "recipient_id": notification.recipient_id,
            "category": notification.category.key,
            "title": title,
            "body": body,
            "url": url,
        },
    )
    if created:
        recipient_id = notification.recipient_id
        transaction.on_commit(lambda: unread_increment(recipient_id=recipient_id))
    return entry


def feed_mark_read(
    *, recipient: Recipient, entry_ids: list[int] | None = None, everything: bool = False
) -> int:
    """Mark entries read; returns how many changed (and the counter drops by exactly that)."""
    entries = FeedEntry.objects.filter(recipient=recipient, read_at__isnull=True)
    if not everything:
        entries = entries.filter(pk__in=entry_ids or [])
    with transaction.atomic():
        marked = entries.update(read_at=timezone.now())
        if marked:
            transaction.on_commit(lambda: unread_decrement(recipient_id=recipient.pk, by=marked))
    return marked
