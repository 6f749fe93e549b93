"""Routing: a notification becomes its deliveries, through the gate.

`notification_route` locks the notification, asks the gate for a verdict on every
(channel, target), and in one transaction creates the sealed delivery rows, writes the
in-app feed entry (the feed row *is* that delivery) and marks the notification routed;
the send messages for the other channels are published after commit. Only this module
creates deliveries, and every one carries the gate's seal, which the sender checks.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import connection, transaction
from django.template import TemplateSyntaxError
from django.utils import timezone

from deliveries.channels.inapp import feed_entry_write
from deliveries.enqueue import delivery_enqueue
from deliveries.models import (
    AttemptOutcome,
    Delivery,
    DeliveryAttempt,
    DeliveryStatus,
    Reason,
)
from deliveries.outcome_log import delivery_outcome_log
from deliveries.retry import PUSH_CHANNELS
from deliveries.route_lock import notification_lock
from deliveries.selectors import push_targets_by_channel
from deliveries.suppression import suppression_key
from notify.models import Channel, Notification
from notify.rows import ModelInsert
from preferences.gate import ChannelDecision, channels_for, decide_deliveries, gate_seal
from templates_admin.rendering import build_context, render_version
from templates_admin.selectors import published_version_pick

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Started:
    """A delivery whose send message is published after commit."""

    delivery_id: int
    channel: str
    queue: str


def notification_route(*, notification_id: object, now: datetime | None = None) -> list[int]:
    """Run the gate and create the deliveries; write in-app at once, enqueue the rest.

    Safe to run twice: a routed notification only has its still-`queued` deliveries
    enqueued again (the sender's claim drops duplicates). Returns the deliveries started
    (enqueued, or written to the feed).
    """
    now = now or timezone.now()  # an argument so the gate's clock can be shown in tests
    with transaction.atomic():
        notification = notification_lock(notification_id=notification_id)
        if notification.routed_at is not None:
            started = _still_queued(notification)
            done: list[int] = []
        elif notification.cancelled_at is not None:  # cancelled before it was routed
            started, done = [], []
            _routed_mark(notification, now)
        else:  # the deliveries and routed_at in one statement
            started, done = _deliveries_create(
                notification, channels_for(notification), now, suppressed=notification.suppressed
            )
        owner = (notification.recipient_id, notification.pk)
        transaction.on_commit(lambda: _deliveries_start(started, owner))
    return [*done, *(s.delivery_id for s in started)]


def notification_fallback(*, notification_id: object, failed_channel: str) -> list[int]:
    """After a delivery on `failed_channel` ended dead, try the category's fallback
    channel — through the gate, like any delivery. Returns the deliveries started."""
    now = timezone.now()
    with transaction.atomic():
        notification = notification_lock(notification_id=notification_id)
        fallback = notification.category.fallback_channel
        if not fallback or fallback == failed_channel:
            return []
        started, done = _deliveries_create(
            notification, [fallback], now, rerun=True, suppressed=notification.suppressed
        )
        owner = (notification.recipient_id, notification.pk)
        transaction.on_commit(lambda: _deliveries_start(started, owner))
    logger.info(
        "notification %s: %s ended dead, falling back to %s", notification_id, failed_channel,
        fallback,
    )  # fmt: skip
    return [*done, *(s.delivery_id for s in started)]


def gate_decide(
    notification: Notification, *, channels: Sequence[str], now: datetime
) -> list[ChannelDecision]:
    """The gate's verdicts for these channels, with the recipient's live push devices
    read (in one query) only when a push channel is asked for."""
    push = [c for c in channels if c in PUSH_CHANNELS and c in settings.NOTIFY_CHANNELS_ENABLED]
    targets = push_targets_by_channel(recipient_id=notification.recipient_id, channels=push)
    return decide_deliveries(notification, channels=list(channels), push_targets=targets, now=now)


def _deliveries_create(
    notification: Notification,
    channels: Sequence[str],
    now: datetime,
    *,
    suppressed: Sequence[str] | None,
    rerun: bool = False,
) -> tuple[list[Started], list[int]]:
    """One sealed delivery row per gate decision, in-app written at once.

    Returns (deliveries to enqueue after commit, in-app deliveries already written).
    `suppressed`: the recipient's addresses on the hard-bounce list (`suppression_key`s).
    `rerun`: rows may exist already (a fallback); existing ones are left alone, and an
    in-app row goes through the sender like the other channels.
    """
    decisions = gate_decide(notification, channels=channels, now=now)
    bounced = frozenset(suppressed or ())
    rows: list[Delivery] = []
    attempts: list[DeliveryAttempt] = []
    for decision in decisions:
        deadline = delivery_deadline(notification, decision.channel)
        status, reason = decision.status, decision.reason
        if decision.allowed and deadline <= now:
            # Routed only after its deadline (a relay or worker was away): never sent late.
            status, reason = DeliveryStatus.EXPIRED, Reason.DEADLINE_PASSED
        elif decision.allowed and (
            suppression_key(channel=decision.channel, address=decision.target) in bounced
        ):
            status, reason = DeliveryStatus.SUPPRESSED, Reason.ADDRESS_SUPPRESSED
        live = status == DeliveryStatus.QUEUED
        row = Delivery(
            notification=notification,
            channel=decision.channel,
            target=decision.target,
            queue=notification.category.queue,
            status=status,
            reason=reason,
            next_attempt_at=decision.not_before or (now if live else None),
            deadline=deadline,
            finished_at=None if live or decision.not_before else now,
            enqueued_at=now if live else None,
            gate_seal=gate_seal(
                notification_id=notification.pk, channel=decision.channel, target=decision.target
            ),
            recipient_id=notification.recipient_id,
            occurred_at=notification.occurred_at,
            accepted_at=notification.created_at,
        )
        if live and decision.channel == Channel.INAPP and not rerun:
            attempt = _inapp_write(notification, row, now)
            if attempt is not None:
                attempts.append(attempt)
        rows.append(row)
    if rerun:
        Delivery.objects.bulk_create(rows, ignore_conflicts=True)
        created = list(
            Delivery.objects.filter(
                notification=notification,
                channel__in=list(channels),
                status=DeliveryStatus.QUEUED,
            )
        )
    else:
        _routed_write(notification, rows, attempts, now)
        created = rows
    if attempts:
        for attempt in attempts:
            row = attempt.delivery
            delivery_outcome_log(
                row, status=row.status, reason=row.reason, duration=attempt.duration_ms
            )
    started = [
        Started(row.pk, row.channel, row.queue)
        for row in created
        if row.status == DeliveryStatus.QUEUED
    ]
    done = [row.pk for row in created if row.channel == Channel.INAPP and row.attempts]
    return started, done


def _inapp_write(
    notification: Notification, row: Delivery, now: datetime
) -> DeliveryAttempt | None:
    """Render and write the feed entry for an in-app delivery, settling `row` with it.

    Returns the attempt to record, or None when rendering failed in an unexpected way:
    the row then stays `queued` and the sender retries it like any channel.
    """
    version = published_version_pick(
        notification.inapp_published, locale=notification.recipient.locale
    )
    row.attempts = 1
    row.claimed_at = now
    row.enqueued_at = None
    if version is None:
        return _settle(row, now, Reason.NO_TEMPLATE, "no published template for this channel")
    row.template_version = version
    clock = time.monotonic()
    try:
        message = render_version(version, _context(notification))
    except TemplateSyntaxError as error:
        return _settle(row, now, Reason.RENDER_ERROR, f"template error: {error}")
    except Exception:
        logger.exception(
            "notification %s: in-app render raised; the sender retries", notification.pk
        )
        row.attempts = 0
        row.claimed_at = None
        row.enqueued_at = now
        return None
    entry = feed_entry_write(notification=notification, message=message)
    row.status = DeliveryStatus.DELIVERED
    row.provider_message_id = f"feed:{entry.pk}"
    row.finished_at = timezone.now()  # when the entry was written (latency metrics read it)
    return DeliveryAttempt(
        delivery=row,
        number=1,
        started_at=now,
        duration_ms=int((time.monotonic() - clock) * 1000),
        outcome=AttemptOutcome.DELIVERED,
    )


def _settle(row: Delivery, now: datetime, reason: str, response: str) -> DeliveryAttempt:
    """An in-app delivery that cannot be written: failed for good, with its reason."""
    row.status = DeliveryStatus.FAILED
    row.reason = reason
    row.last_error = response
    row.finished_at = now
    return DeliveryAttempt(
        delivery=row,
        number=1,
        started_at=now,
        duration_ms=0,
        outcome=AttemptOutcome.PERMANENT,
        response=response,
    )


def _context(notification: Notification) -> dict:
    recipient = notification.recipient
    return build_context(
        notification.payload,
        recipient={
            "user_id": recipient.user_id,
            "locale": recipient.locale,
            "timezone": recipient.timezone,
        },
    )


_DELIVERY_INSERT = ModelInsert(Delivery)
_ATTEMPT_INSERT = ModelInsert(DeliveryAttempt, computed=("delivery_id",))


def _routed_write(
    notification: Notification,
    rows: list[Delivery],
    attempts: list[DeliveryAttempt],
    now: datetime,
) -> None:
    """One statement: the delivery rows, the attempt rows of those settled already (the
    in-app one), and the notification marked routed (by id and month: one partition).
    Gives `rows` their ids. Written as SQL rather than two bulk_creates and an update:
    one round trip instead of three, and none of the ORM's per-call compiling."""
    if not rows:  # nothing to deliver on any channel
        _routed_mark(notification, now)
        notification.routed_at = now
        return
    values, params = _DELIVERY_INSERT.values_sql(rows)
    sql = [
        f"WITH d AS (INSERT INTO {Delivery._meta.db_table} ({_DELIVERY_INSERT.columns_sql})"
        f" VALUES {values} RETURNING id, channel, target)"
    ]
    if attempts:
        # Each attempt finds its delivery's new id by (channel, target), unique per
        # notification.
        keyed = []
        for attempt in attempts:
            if attempt.accepted_at is None:
                attempt.accepted_at = attempt.delivery.accepted_at
            one, one_params = _ATTEMPT_INSERT.values_sql([attempt], typed=True)
            keyed.append(one[:-1] + ", %s::text, %s::text)")
            params += [*one_params, attempt.delivery.channel, attempt.delivery.target]
        columns = _ATTEMPT_INSERT.columns_sql
        picked = ", ".join(f"v.{column}" for column in _ATTEMPT_INSERT.columns)
        sql.append(
            f", a AS (INSERT INTO {DeliveryAttempt._meta.db_table} ({columns}, delivery_id)"
            f" SELECT {picked}, d.id FROM (VALUES {', '.join(keyed)})"
            f" AS v({columns}, key_channel, key_target)"
            " JOIN d ON d.channel = v.key_channel AND d.target = v.key_target)"
        )
    sql.append(
        f", r AS (UPDATE {Notification._meta.db_table} SET routed_at = %s"
        " WHERE id = %s AND created_at = %s)"
        " SELECT id, channel, target FROM d"
    )
    params += [now, notification.pk, notification.created_at]
    with connection.cursor() as cursor:
        cursor.execute("".join(sql), params)
        ids = {(channel, target): pk for pk, channel, target in cursor.fetchall()}
    for row in rows:
        row.pk = ids[(row.channel, row.target)]
        row._state.adding, row._state.db = False, connection.alias
    notification.routed_at = now


def _routed_mark(notification: Notification, now: datetime) -> None:
    """Mark it routed; by id and month, so PostgreSQL plans and updates one partition."""
    Notification.objects.filter(pk=notification.pk, created_at=notification.created_at).update(
        routed_at=now
    )


def _still_queued(notification: Notification) -> list[Started]:
    """A route that runs again (a redelivered message) resends what is still queued."""
    rows = Delivery.objects.filter(
        notification=notification, status=DeliveryStatus.QUEUED
    ).values_list("pk", "channel", "queue")
    return [Started(pk, channel, queue) for pk, channel, queue in rows]


def _deliveries_start(started: list[Started], owner: tuple[int, object]) -> None:
    """Publish the send messages (after commit); `enqueued_at` was written with the row."""
    for item in started:
        delivery_enqueue(
            delivery_id=item.delivery_id,
            channel=item.channel,
            queue=item.queue,
            push_owner=owner,
            mark_enqueued=False,
        )


def delivery_deadline(notification: Notification, channel: str) -> datetime:
    """When a delivery stops being worth sending: the notification's TTL, else its
    category's, else the channel's default (NOTIFY_CHANNEL_DEADLINE_SECONDS).

    Counted from when the notification was due: a scheduled one's `send_at`, else its
    creation (a scheduled login code must not be born expired).
    """
    due = max(notification.created_at, notification.send_at or notification.created_at)
    return due + timedelta(seconds=delivery_ttl_seconds(notification, channel))


def delivery_ttl_seconds(notification: Notification, channel: str) -> int:
    """How long a delivery on `channel` stays worth sending: the notification's TTL, else
    its category's, else the channel's default."""
    return (
        notification.ttl_seconds
        or notification.category.ttl_seconds
        or settings.NOTIFY_CHANNEL_DEADLINE_SECONDS[channel]
    )
