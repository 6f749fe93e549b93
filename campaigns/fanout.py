"""Launching a campaign and fanning it out: set-based, in batches, resumable.

Each batch is one transaction on the locked campaign row: one statement takes the next
NOTIFY_CAMPAIGN_BATCH_SIZE audience members by recipient id after the checkpoint and
inserts their event keys (`INSERT … SELECT … ON CONFLICT (producer_id, event_id) DO
NOTHING`), the notifications of the keys that were new, and their outbox rows; then the
checkpoint and created count move in the same
transaction. The outbox trigger wakes the relay, which publishes one route task per
notification through the normal gate. The task then publishes itself for the next batch,
so it yields between batches, until the audience is exhausted.

Resumable: a worker killed mid-batch rolls the batch back and its message is delivered
again (acks late) from the same checkpoint; a batch that did commit is never repeated,
and ON CONFLICT would make it harmless anyway. Each fan-out message carries the
checkpoint it expects, so a duplicate message (or one the stall recovery sent while the
original was still queued) finds the checkpoint moved and stops: one chain per campaign.

One window is left: a worker killed after its batch committed but before the next
message was published. Its message comes back redelivered and finds the checkpoint moved;
a redelivered message therefore publishes the fan-out from the current checkpoint before
it stops. If the chain was in fact alive that second message is a duplicate and stops as
above, so the chain never needs the beat's stall recovery (minutes) after a kill.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from datetime import datetime, time, timedelta
from typing import Any

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db import connection, transaction
from django.utils import timezone

from campaigns.audience import RECIPIENTS, audience_sql
from campaigns.models import AudienceKind, Campaign, CampaignStatus
from campaigns.pacing import (
    batch_local_dues,
    campaign_pace,
    local_campaign_rate,
    local_moments,
    local_slots_plan,
)
from flow.priority import high_work_seen
from notify.broker import publish_task
from notify.models import Category, EventKey, Notification, Outbox, Producer
from notify.outbox_wake import outbox_wake_after_commit

logger = logging.getLogger(__name__)

FAN_OUT_TASK = "campaigns.fan_out"
ADMIN_PRODUCER = "campaigns"  # the producer of campaigns launched in admin


@dataclass(frozen=True)
class FanOutStep:
    """What one fan-out run did: `more` when another batch should follow."""

    created: int
    more: bool
    checkpoint: int


def campaign_launch(
    *,
    name: str,
    category: Category,
    payload: dict[str, Any],
    audience_kind: str,
    audience_spec: dict[str, Any],
    send_at: datetime | None = None,
    producer: Producer | None = None,
    launched_by: AbstractBaseUser | None = None,
    send_rate: float | None = None,
    local_time: time | None = None,
) -> Campaign:
    """Store a validated campaign; it starts now (the fan-out task is published after
    commit) or, with a future `send_at`, stays scheduled for the beat to start.

    Without a producer (an admin launch) the notifications belong to the producer named
    "campaigns". `send_rate` and `local_time` pace its members (campaigns/pacing.py).
    """
    if producer is None:
        producer, _ = Producer.objects.get_or_create(name=ADMIN_PRODUCER)
    now = timezone.now()
    starts_now = send_at is None or send_at <= now
    campaign = Campaign.objects.create(
        name=name,
        category=category,
        payload=payload,
        audience_kind=audience_kind,
        audience_spec=audience_spec if audience_kind != AudienceKind.ALL else {},
        send_at=send_at,
        status=CampaignStatus.RUNNING if starts_now else CampaignStatus.SCHEDULED,
        producer=producer,
        launched_by=launched_by,
        send_rate=send_rate,
        local_time=local_time,
    )
    if starts_now:
        fan_out_publish_on_commit(campaign_id=campaign.pk, checkpoint=0)
    return campaign


def fan_out_publish_on_commit(*, campaign_id: int, checkpoint: int) -> None:
    """Publish the fan-out for the batch after `checkpoint` once the transaction commits."""
    transaction.on_commit(lambda: _fan_out_publish(campaign_id, checkpoint))


def _fan_out_publish(campaign_id: int, checkpoint: int) -> None:
    try:
        publish_task(
            FAN_OUT_TASK,
            args=[campaign_id, checkpoint],
            queue="low",
            priority=settings.NOTIFY_CAMPAIGN_FAN_OUT_PRIORITY,
        )
    except Exception:  # the broker is away: the beat's stall recovery publishes it again
        logger.exception("campaign %s: fan-out publish failed; the beat retries", campaign_id)


def fan_out_batch_size() -> int:
    """How many audience members the next batch takes: NOTIFY_CAMPAIGN_BATCH_SIZE, or the
    smaller NOTIFY_CAMPAIGN_BUSY_BATCH_SIZE while login codes are in flight on this host
    (as this task's start read it), so the batch's transaction is short beside them."""
    if high_work_seen():
        return min(settings.NOTIFY_CAMPAIGN_BUSY_BATCH_SIZE, settings.NOTIFY_CAMPAIGN_BATCH_SIZE)
    return settings.NOTIFY_CAMPAIGN_BATCH_SIZE


def campaign_fan_out(
    *,
    campaign_id: int,
    checkpoint: int | None = None,
    batch_size: int | None = None,
    redelivered: bool = False,
) -> FanOutStep:
    """Fan out one batch of the campaign and publish the next one after commit.

    `checkpoint` is the one the message was published with (None: whatever it is now);
    a running campaign whose checkpoint moved on, or that is paused, cancelled, done or
    locked by another fan-out, is left alone. A `redelivered` message whose checkpoint
    moved on publishes the fan-out from the current checkpoint (its worker may have died
    between the commit and the publish).
    """
    batch_size = batch_size or fan_out_batch_size()
    with transaction.atomic():
        campaign = (
            # Only the campaign row: a lock on its category would make another campaign's
            # fan-out (skip_locked) pass over its own row.
            Campaign.objects.select_for_update(skip_locked=True, of=("self",))
            .select_related("category")
            .filter(pk=campaign_id)
            .first()
        )
        if campaign is None or campaign.status != CampaignStatus.RUNNING:
            return FanOutStep(0, False, campaign.checkpoint if campaign else 0)
        if checkpoint is not None and checkpoint != campaign.checkpoint:
            if redelivered:
                fan_out_publish_on_commit(campaign_id=campaign.pk, checkpoint=campaign.checkpoint)
            return FanOutStep(0, False, campaign.checkpoint)
        now = timezone.now()
        if campaign.audience_until is None:
            _audience_fix(campaign)
        # This backend runs at the campaign's low priority: a NOTIFY sent by this commit
        # would make a login code's intake wait whenever the scheduler preempted it.
        outbox_wake_after_commit()
        last_id, taken, created = _batch_insert(campaign, batch_size, now)
        created_count = campaign.created_count + created
        if taken < batch_size:  # a short (or empty) batch: the audience is exhausted
            # The audience is what was created: a recipient deleted during the fan-out
            # is not in it, so every member stays countable under one status.
            Campaign.objects.filter(pk=campaign.pk).update(
                status=CampaignStatus.DONE,
                checkpoint=last_id,
                created_count=created_count,
                audience_size=created_count,
                fanned_out_at=now,
                updated_at=now,
            )
            logger.info("campaign %s: fanned out, %s notifications", campaign.pk, created_count)
            return FanOutStep(created, False, last_id)
        Campaign.objects.filter(pk=campaign.pk).update(
            checkpoint=last_id,
            created_count=created_count,
            updated_at=now,
            local_slots=campaign.local_slots,  # the turns this batch took
        )
        fan_out_publish_on_commit(campaign_id=campaign.pk, checkpoint=last_id)
    return FanOutStep(created, True, last_id)


def _audience_fix(campaign: Campaign) -> None:
    """First batch: count the audience and fix its upper recipient id (one query); a
    local-time campaign with a rate also plans its members' turns (one grouped query)."""
    condition, params = audience_sql(campaign)
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT count(*), coalesce(max(r.id), 0) FROM {RECIPIENTS} r WHERE {condition}",
            params,
        )
        size, until = cursor.fetchone()
    # The paced release schedule starts with the first batch.
    paced_from = timezone.now()
    campaign.audience_size, campaign.audience_until = size, until
    campaign.paced_from = paced_from
    rate = local_campaign_rate(campaign) if campaign.local_time is not None else None
    if rate is not None:  # the turns of members who share a moment (one grouped query)
        moments = local_moments(campaign=campaign, start=paced_from, until=until)
        campaign.local_slots = local_slots_plan(moments=moments, rate=rate)
    Campaign.objects.filter(pk=campaign.pk).update(
        audience_size=size,
        audience_until=until,
        paced_from=paced_from,
        local_slots=campaign.local_slots,
    )


def _batch_insert(campaign: Campaign, batch_size: int, now: datetime) -> tuple[int, int, int]:
    """One statement: the next batch of recipients, their notifications and outbox rows.

    Returns (last recipient id of the batch, recipients taken, notifications created).
    The fingerprint is computed in SQL exactly as `request_fingerprint` does in Python:
    its canonical JSON ends with the user id, so only that part is built per row.
    """
    condition, params = audience_sql(campaign, batch=batch_size)
    canonical_head = _fingerprint_head(campaign)
    due, due_params = _due_sql(campaign, batch_size, now)
    outbox_columns, outbox_values = _outbox_columns()
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            WITH picked AS (
                SELECT r.id, r.user_id
                  FROM {RECIPIENTS} r
                 WHERE r.id > %(checkpoint)s AND r.id <= %(until)s AND {condition}
                 ORDER BY r.id
                 LIMIT %(limit)s
            ), batch AS (
                -- When each member is due (NULL: at once), campaigns/pacing.py.
                SELECT p.id, p.user_id, gen_random_uuid() AS notification_id, {due} AS due
                  FROM picked p
                  LEFT JOIN unnest(%(due_ids)s::bigint[], %(due_at)s::timestamptz[])
                       AS d(recipient_id, due_at) ON d.recipient_id = p.id
            ), k AS (
                -- The event keys decide what is new (a resumed batch finds its own).
                INSERT INTO {EventKey._meta.db_table} (notification_id, producer_id, event_id)
                SELECT b.notification_id, %(producer)s, %(prefix)s || b.user_id
                  FROM batch b
                 ORDER BY b.id
                ON CONFLICT (producer_id, event_id) DO NOTHING
                RETURNING notification_id
            ), n AS (
                INSERT INTO {Notification._meta.db_table}
                    (id, producer_id, event_id, recipient_id, category_id, payload, channels,
                     ttl_seconds, send_at, fingerprint, created_at)
                SELECT b.notification_id, %(producer)s, %(prefix)s || b.user_id, b.id,
                       %(category)s, %(payload)s::jsonb, NULL, NULL, b.due,
                       encode(sha256(convert_to(
                           %(head)s || to_json(b.user_id::text)::text || '}}', 'UTF8')), 'hex'),
                       %(now)s
                  FROM k JOIN batch b ON b.notification_id = k.notification_id
                 ORDER BY b.id
                RETURNING id
            ), o AS (
                INSERT INTO {Outbox._meta.db_table} ({outbox_columns})
                SELECT {outbox_values} FROM n JOIN batch b ON b.notification_id = n.id
                RETURNING 1
            )
            SELECT (SELECT max(id) FROM batch), (SELECT count(*) FROM batch),
                   (SELECT count(*) FROM o)
            """,
            {
                **params,
                "checkpoint": campaign.checkpoint,
                "until": campaign.audience_until,
                "limit": batch_size,
                "producer": campaign.producer_id,
                "prefix": campaign.event_id_prefix,
                "category": campaign.category_id,
                "payload": json.dumps(campaign.payload),
                "head": canonical_head,
                "now": now,
                "queue": campaign.category.sending_queue,
                **due_params,
            },
        )
        last_id, taken, created = cursor.fetchone()
    return last_id or campaign.checkpoint, taken, created


def _fingerprint_head(campaign: Campaign) -> str:
    """`request_fingerprint`'s canonical JSON up to the user id's value: sorted keys put
    `user_id` last, so the SQL appends the quoted user id and the closing brace. (A test
    compares the stored fingerprints with `request_fingerprint` itself.)"""
    canonical = json.dumps(
        {
            "user_id": "",
            "category": campaign.category.key,
            "payload": campaign.payload,
            "channels": None,
            "ttl_seconds": None,
        },
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
    )
    return canonical.removesuffix('"user_id":""}') + '"user_id":'


def _due_sql(campaign: Campaign, batch_size: int, now: datetime) -> tuple[str, dict[str, Any]]:
    """When each member `p` of the batch is due, as an expression (NULL: at once; `d` is
    the member's row of a local-time schedule), with its parameters.

    Paced: member i of the campaign (in recipient order) `i / rate` seconds after the
    first batch; local time: each member's moment, computed in Python (campaigns/pacing.py).
    The time becomes the notification's `send_at` (its deadlines count from it, so an
    email due in ten hours is not born expired) and its outbox row's due time.
    """
    unscheduled: dict[str, Any] = {"due_ids": [], "due_at": []}
    if campaign.local_time is not None:
        ids, dues = batch_local_dues(campaign=campaign, limit=batch_size, now=now)
        return "d.due_at", {"due_ids": ids, "due_at": dues}
    rate = campaign_pace(requested=campaign.send_rate, channels=campaign.category.default_channels)
    if rate is None:
        return "NULL::timestamptz", unscheduled
    expression = (
        "%(paced_from)s + (%(created_before)s + row_number() OVER (ORDER BY p.id) - 1)::float8"
        " * %(step)s::interval"
    )
    return expression, {
        **unscheduled,
        "paced_from": campaign.paced_from or now,
        "created_before": campaign.created_count,
        "step": timedelta(seconds=1 / rate),
    }


def _outbox_columns() -> tuple[str, str]:
    """The outbox columns a new row needs (due when its member is, `b.due`, else at once;
    their producer lets the relay take turns across producers if their class is a fair
    one)."""
    columns = [
        "notification_id",
        "queue",
        "created_at",
        "due_at",
        "publish_attempts",
        "producer_id",
    ]
    values = ["n.id", "%(queue)s", "%(now)s", "coalesce(b.due, %(now)s)", "0", "%(producer)s"]
    return ", ".join(columns), ", ".join(values)


def campaigns_start_due(*, now: datetime | None = None) -> list[int]:
    """Beat: start scheduled campaigns whose send_at came, and publish again the fan-out
    of running campaigns that made no batch for NOTIFY_CAMPAIGN_STALL_SECONDS (a lost
    message or broker outage). Returns the campaigns whose fan-out was published."""
    now = now or timezone.now()
    stalled_before = now - timedelta(seconds=settings.NOTIFY_CAMPAIGN_STALL_SECONDS)
    with transaction.atomic():
        due = list(
            Campaign.objects.select_for_update(skip_locked=True).filter(
                status=CampaignStatus.SCHEDULED, send_at__lte=now
            )
        )
        Campaign.objects.filter(pk__in=[c.pk for c in due]).update(
            status=CampaignStatus.RUNNING, updated_at=now
        )
        stalled = list(
            Campaign.objects.select_for_update(skip_locked=True).filter(
                status=CampaignStatus.RUNNING, updated_at__lt=stalled_before
            )
        )
        for campaign in [*due, *stalled]:
            fan_out_publish_on_commit(campaign_id=campaign.pk, checkpoint=campaign.checkpoint)
    if stalled:
        logger.warning("campaigns %s: fan-out stalled; published again", [c.pk for c in stalled])
    return [c.pk for c in [*due, *stalled]]
