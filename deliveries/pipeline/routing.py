"""Routing: a notification becomes its deliveries, through the gate.

`notification_route` locks the notification, asks the gate for a verdict on every
(channel, target), and in one transaction creates the sealed delivery rows and marks the
notification routed. Right after it commits, the in-app deliveries are sent in the
process, through the one attempt function every send takes (the feed row *is* that
delivery), and the send messages for the other channels are published. Only this module
creates deliveries (its write statement is route_write.py), and every one carries the
gate's seal, which the sender checks.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from deliveries.changes import changes_announce, subject_of
from deliveries.models import Delivery, DeliveryStatus, Reason
from deliveries.pipeline.attempt import deliveries_attempt
from deliveries.pipeline.claim import Loaded
from deliveries.pipeline.delivery_rows import delivery_row
from deliveries.pipeline.digests import (
    Filed,
    digest_items_file,
    digest_window_seconds,
    wakeups_publish,
)
from deliveries.pipeline.enqueue import deliveries_enqueue
from deliveries.pipeline.outcome import AttemptReport, AttemptResult
from deliveries.pipeline.route_lock import notification_lock, notifications_lock
from deliveries.pipeline.route_write import NEW_DELIVERY, DeliveryRow, routed_write
from deliveries.selectors import push_targets_by_recipient
from flow.fairness import push_turn_order
from notify.models import PUSH_CHANNELS, Channel, Notification
from notify.rows import instance_as_saved, related_cache
from preferences.gate import (
    ChannelDecision,
    GateRequest,
    channels_for,
    decide_deliveries_many,
)
from templates_admin.selectors import published_version_pick

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Started:
    """A delivery whose send message is published after commit."""

    delivery_id: int
    channel: str
    queue: str
    notification_id: object
    target: str


@dataclass(frozen=True)
class Routed:
    """What a route did: the deliveries it started (enqueued, or written), and those it
    left for the routing thread to send itself, by channel (see `notifications_route_here`)."""

    started: list[int]
    here: dict[str, list[int]]


def notification_route(*, notification_id: object, now: datetime | None = None) -> list[int]:
    """Route one notification (a batch of one). Raises Notification.DoesNotExist."""
    routed = _route(notification_ids=[notification_id], now=now)
    if routed is None:
        raise Notification.DoesNotExist(f"notification {notification_id} does not exist")
    return routed


def notifications_route(
    *, notification_ids: Sequence[object], now: datetime | None = None
) -> list[int]:
    """Run the gate and create the deliveries of a batch of notifications; write in-app
    at once, enqueue the rest (one send message per channel per batch).

    One transaction of a few statements whatever the batch's size: the lock (which
    reads what routing needs), the gate's reads and its cap count, the feed entries,
    and one write of every delivery, attempt and routed mark. Safe to run twice: a
    routed notification only has its still-`queued` deliveries enqueued again (the
    sender's claim drops duplicates). Ids that no longer exist (erased, or never
    committed) are skipped. Returns the deliveries started (enqueued, or written).
    """
    return _route(notification_ids=notification_ids, now=now) or []


def notifications_route_here(*, notification_ids: Sequence[object], queue: str) -> Routed:
    """`notifications_route`, run by a worker of `queue` that can send what it routes:
    deliveries of that queue on a channel sent without a per-recipient push turn (email,
    SMS), at most NOTIFY_SEND_AT_ROUTE_MAX of a channel, are not published but returned
    in `here`, for this thread to send at once if its channel has a free sender (else it
    publishes them). A login code then skips the broker's round trip between routing and
    sending; a burst's batches still go to the senders by message. A worker lost before
    it sends them leaves its route message unacknowledged: the route runs again and
    starts them."""
    here: dict[str, list[int]] = {}
    started = _route(notification_ids=notification_ids, now=None, here=(queue, here)) or []
    return Routed(started, here)


def _route(
    *,
    notification_ids: Sequence[object],
    now: datetime | None,
    here: tuple[str, dict[str, list[int]]] | None = None,
) -> list[int] | None:
    """`notifications_route`; None when none of the ids exists. `here`: (the routing
    worker's queue, the dict to fill with the deliveries it sends itself)."""
    now = now or timezone.now()  # an argument so the gate's clock can be shown in tests
    in_time = [True]  # the commit came before this returns (no outer transaction)
    with transaction.atomic():
        notifications = notifications_lock(notification_ids=notification_ids)
        if not notifications:
            logger.warning("notifications %s: none exists; nothing to route", notification_ids)
            return None
        if len(notifications) < len(set(map(str, notification_ids))):
            found = {str(n.pk) for n in notifications}
            gone = [pk for pk in notification_ids if str(pk) not in found]
            logger.warning("notifications %s: no such notification; not routed", gone)
        started: list[Started] = []
        fresh: list[Notification] = []
        cancelled: list[Notification] = []
        for notification in notifications:
            if notification.routed_at is not None:
                started.extend(_still_queued(notification))
            elif notification.cancelled_at is not None:  # cancelled before it was routed
                cancelled.append(notification)
            else:
                fresh.append(notification)
        _routed_mark(cancelled, now)
        created, inapp, wakeups = _deliveries_create(fresh, now)
        started.extend(created)
        owners = {n.pk: (n.recipient_id, n.pk) for n in notifications}
        transaction.on_commit(
            lambda: _deliveries_start(started, owners, here=here if in_time[0] else None)
        )
        if wakeups is not None:
            transaction.on_commit(lambda: wakeups_publish(**wakeups))
    in_time[0] = False
    # In-app goes at once, here rather than through a message: the batch's feed entries
    # in one statement, checked, claimed and recorded like any send (a worker lost
    # before this leaves them queued, and the sweeper sends them).
    deliveries_fallback(reports=deliveries_attempt(loaded=inapp))
    return [*(item.delivery.pk for item in inapp), *(s.delivery_id for s in started)]


def notification_fallback(*, notification_id: object, failed_channel: str) -> list[int]:
    """After a delivery on `failed_channel` ended dead, try the category's fallback
    channel — through the gate, like any delivery. Returns the deliveries started."""
    now = timezone.now()
    with transaction.atomic():
        notification = notification_lock(notification_id=notification_id)
        fallback = notification.category.fallback_channel
        if not fallback or fallback == failed_channel:
            return []
        started = _fallback_create(notification, fallback, now)
        owners = {notification.pk: (notification.recipient_id, notification.pk)}
        transaction.on_commit(lambda: _deliveries_start(started, owners, here=None))
    logger.info(
        "notification %s: %s ended dead, falling back to %s", notification_id, failed_channel,
        fallback,
    )  # fmt: skip
    return [s.delivery_id for s in started]


def gate_decide(
    notification: Notification, *, channels: Sequence[str], now: datetime
) -> list[ChannelDecision]:
    """The gate's verdicts for these channels, with the recipient's live push devices
    read (in one query) only when a push channel is asked for."""
    return _gate_decide_many([(notification, list(channels))], now=now)[0]


def gate_decide_many(
    asked: Sequence[tuple[Notification, list[str]]], *, now: datetime
) -> list[list[ChannelDecision]]:
    """`gate_decide` for a batch of (notification, channels): the gate's reads shared."""
    return _gate_decide_many(asked, now=now)


def _gate_decide_many(
    asked: Sequence[tuple[Notification, list[str]]], *, now: datetime, gather: bool = False
) -> list[list[ChannelDecision]]:
    """The gate's verdicts for a batch of (notification, channels), with every
    recipient's live push devices read in one query when a push channel is asked for."""
    enabled = settings.NOTIFY_CHANNELS_ENABLED
    push = {c for _, channels in asked for c in channels if c in PUSH_CHANNELS and c in enabled}
    targets = push_targets_by_recipient(
        recipient_ids=[n.recipient_id for n, channels in asked if push.intersection(channels)],
        channels=push,
    )
    # The deliveries are enqueued in target order, and the first ones take the push
    # slots: a recipient's browsers take turns, so none is dropped every time.
    webpush = {
        r: found[Channel.WEBPUSH] for r, found in targets.items() if found.get(Channel.WEBPUSH)
    }
    for recipient_id, devices in push_turn_order(devices=webpush).items():
        targets[recipient_id][Channel.WEBPUSH] = devices
    requests = [
        GateRequest(n, channels, targets.get(n.recipient_id, {}), _uncapped(n, channels, gather))
        for n, channels in asked
    ]
    return decide_deliveries_many(requests, now=now)


def _uncapped(notification: Notification, channels: Sequence[str], gather: bool) -> frozenset:
    """The channels the route files in digest windows: the daily cap counts their digest
    once, at its close, not each event here."""
    if not gather or not notification.category.digest_windows:
        return frozenset()
    return frozenset(c for c in channels if digest_window_seconds(notification, c) is not None)


def deliveries_fallback(*, reports: Sequence[AttemptReport]) -> list[int]:
    """After an attempt, the category's fallback channel for each delivery that ended
    dead on a channel that falls back (NOTIFY_FALLBACK_FROM_CHANNELS). Returns the
    deliveries started."""
    started: list[int] = []
    for report in reports:
        if (
            report.result is AttemptResult.DEAD
            and report.notification_id is not None
            and report.channel in settings.NOTIFY_FALLBACK_FROM_CHANNELS
        ):
            started += notification_fallback(
                notification_id=report.notification_id, failed_channel=report.channel
            )
    return started


def _deliveries_create(
    notifications: Sequence[Notification], now: datetime
) -> tuple[list[Started], list[Loaded], dict | None]:
    """One sealed delivery row per gate decision, for a batch, in one statement (and,
    when some go into digest windows, one more that files them).

    Returns (deliveries to enqueue after commit, in-app deliveries to send at once, the
    wake-ups of digest closes and delays to publish after commit, or None).
    """
    if not notifications:
        return [], [], None
    verdicts = _gate_decide_many(
        [(n, channels_for(n)) for n in notifications], now=now, gather=True
    )
    rows = [
        delivery_row(notification, decision, now)
        for notification, decisions in zip(notifications, verdicts, strict=True)
        for decision in decisions
    ]
    ids = routed_write(notifications, rows, now)
    by_id = {n.pk: n for n in notifications}
    # Announced (status webhooks): each notification routed, and its deliveries that end here
    # (suppressed by the gate or the bounce list, expired), in one statement.
    changes_announce(
        deliveries=[(pk, row.accepted_at, row.status) for row, pk in zip(rows, ids, strict=True)
                    if row.status != DeliveryStatus.QUEUED],
        notifications=[(n.pk, n.created_at) for n in notifications],
        created=[(pk, row.accepted_at) for row, pk in zip(rows, ids, strict=True)],
        subjects=lambda: {pk: subject_of(by_id[row.notification_id], channel=row.channel,
                                         reason=row.reason)
                          for row, pk in zip(rows, ids, strict=True)},
    )  # fmt: skip
    started: list[Started] = []
    inapp: list[Loaded] = []
    filed: list[Filed] = []
    delayed: list[datetime] = []
    for row, pk in zip(rows, ids, strict=True):
        if row.status == DeliveryStatus.DIGESTING:
            notification = by_id[row.notification_id]
            seconds = digest_window_seconds(notification, row.channel)
            filed.append(Filed(notification, pk, row.channel, seconds))
            continue
        if row.reason == Reason.DELAYED_IF_UNREAD:
            delayed.append(row.next_attempt_at)
        if row.status != DeliveryStatus.QUEUED:
            continue
        if row.channel == Channel.INAPP:
            inapp.append(_inapp_loaded(by_id[row.notification_id], row, pk, now))
        else:
            started.append(Started(pk, row.channel, row.queue, row.notification_id, row.target))
    closes = digest_items_file(filed=filed, now=now)
    wakeups = None
    if closes or delayed:
        queue = notifications[0].category.sending_queue
        wakeups = {"closes": closes, "delayed": delayed, "queue": queue}
    return started, inapp, wakeups


def _inapp_loaded(notification: Notification, row: DeliveryRow, pk: int, now: datetime) -> Loaded:
    """An in-app delivery just written, as the sender would load it: with its
    notification, and the version published for the recipient's locale (the lock read
    the choices)."""
    delivery = instance_as_saved(
        Delivery,
        {**row._asdict(), **NEW_DELIVERY, "id": pk, "created_at": now, "updated_at": now},
    )
    related_cache(delivery, "notification", notification)
    version = published_version_pick(
        notification.inapp_published, locale=notification.recipient.locale
    )
    return Loaded(delivery, version)


def _fallback_create(notification: Notification, channel: str, now: datetime) -> list[Started]:
    """The fallback channel's deliveries, through the gate. Rows may exist already (a
    fallback that ran before): those are left alone, and an in-app row goes through the
    sender like the other channels."""
    decisions = gate_decide(notification, channels=[channel], now=now)
    rows = []
    for decision in decisions:
        values = delivery_row(notification, decision, now, gather=False)._asdict()
        del values["notification_id"]
        rows.append(Delivery(notification=notification, **values))
    Delivery.objects.bulk_create(rows, ignore_conflicts=True)
    created = Delivery.objects.filter(
        notification=notification, channel=channel, status=DeliveryStatus.QUEUED
    )
    return [Started(row.pk, row.channel, row.queue, notification.pk, row.target) for row in created]


def _routed_mark(notifications: Sequence[Notification], now: datetime) -> None:
    """Mark them routed; by id and month, so PostgreSQL plans and updates one partition."""
    if notifications:
        routed_write(notifications, [], now)


def _still_queued(notification: Notification) -> list[Started]:
    """A route that runs again (a redelivered message) resends what is still queued."""
    rows = Delivery.objects.filter(
        notification=notification, status=DeliveryStatus.QUEUED
    ).values_list("pk", "channel", "queue", "target")
    return [
        Started(pk, channel, queue, notification.pk, target) for pk, channel, queue, target in rows
    ]


def _deliveries_start(
    started: list[Started],
    owners: dict[object, tuple[int, object]],
    *,
    here: tuple[str, dict[str, list[int]]] | None,
) -> None:
    """Publish the send messages (after commit); `enqueued_at` was written with the rows.
    With `here` (the routing worker's queue, a dict to fill), that queue's email and SMS
    deliveries are kept for the routing thread instead, by channel."""
    if here is not None:
        queue, kept = here
        mine: dict[str, list[int]] = {}
        for s in started:
            if s.queue == queue and s.channel not in PUSH_CHANNELS:
                mine.setdefault(s.channel, []).append(s.delivery_id)
        kept.update(
            (channel, ids)
            for channel, ids in mine.items()
            if len(ids) <= settings.NOTIFY_SEND_AT_ROUTE_MAX
        )
        started = [s for s in started if not (s.queue == queue and s.channel in kept)]
    deliveries_enqueue(
        started=[(s.delivery_id, s.channel, s.queue) for s in started],
        push_owners={
            s.delivery_id: owners[s.notification_id] for s in started if s.channel in PUSH_CHANNELS
        },
        push_devices={s.delivery_id: s.target for s in started if s.channel == Channel.WEBPUSH},
    )
