"""Pausing, resuming and cancelling a campaign — without touching the route or send path.

Design. Routing and sending already refuse work that is not theirs: a notification whose
`routed_at` is set is routed again only as "resend what is still queued", and a sender
claims only `queued`/`retrying` deliveries (anything else is dropped at the claim). So the
controls change rows, never code paths:

- **Pause** (one transaction, on the locked campaign row, which also waits out a fan-out
  batch in progress): the fan-out stops at its next batch (it checks the status).
  Notifications of the campaign not routed yet get `routed_at` set, so a route message
  already in the queue is a no-op; each is recorded in `CampaignHold` with no delivery.
  Deliveries not sent yet (`queued`, `retrying`, `deferred`) are recorded in
  `CampaignHold` with their status, reason and `next_attempt_at`, then set to `deferred`
  with reason `campaign_paused` and no `next_attempt_at`: the quiet-hours release only
  takes deferred rows that are due, the sweeper only claimable ones, and a send message
  in flight finds nothing to claim. Nothing is dropped: every held row is in the table.
- **Resume**: held deliveries get their recorded state back (a queued one due now) and
  queued/retrying ones are enqueued after commit (`delivery_enqueue`; a retry that is
  not due yet is put back by the claim until it is; a quiet-hours deferral is left to the
  release). Held notifications get `routed_at` cleared and their outbox row marked
  unpublished, so the relay publishes their route tasks again and they pass the gate
  then; a paced campaign's take their turns again from now at its rate, and the members
  still to fan out come after them. The fan-out is published again if it had not finished.
- **Cancel**: the fan-out stops; every delivery not final and not being sent ends
  `cancelled` (reason `campaign_cancelled`); notifications not routed yet are marked
  routed, so they never make deliveries; holds are forgotten.

A delivery being sent at that moment (`sending`) finishes its attempt either way: the
claim is the sender's, and its outcome is written conditionally on it. If that attempt
ends `retrying`, the retry is not held (a known gap; pause/cancel again catches it).

Counting: every audience member is one of not created yet, created but not routed, or a
notification with deliveries; `selectors.campaign_progress` reads all of it in one query.
"""

from __future__ import annotations

import logging
from datetime import timedelta

from django.db import connection, transaction
from django.utils import timezone

from campaigns.fanout import fan_out_publish_on_commit
from campaigns.models import Campaign, CampaignHold, CampaignStatus
from campaigns.pacing import campaign_pace
from campaigns.selectors import (
    DELIVERIES,
    NOTIFICATIONS,
    campaign_notifications_sql,
    campaign_params,
)
from deliveries.models import DeliveryStatus, Reason
from deliveries.pipeline.enqueue import delivery_enqueue
from notify.models import Outbox
from notify.outbox_wake import outbox_wake

logger = logging.getLogger(__name__)

PAUSABLE = (CampaignStatus.SCHEDULED, CampaignStatus.RUNNING, CampaignStatus.DONE)
CANCELLABLE = (*PAUSABLE, CampaignStatus.PAUSED)
# Not sent yet and not in a sender's hands: what pause holds and cancel ends.
UNSENT = (DeliveryStatus.QUEUED, DeliveryStatus.RETRYING, DeliveryStatus.DEFERRED)

HOLDS = CampaignHold._meta.db_table


class CampaignStateError(Exception):
    """The campaign is not in a state that allows this operation."""


def _locked(campaign_id: int, allowed: tuple[str, ...], action: str) -> Campaign:
    campaign = Campaign.objects.select_for_update().get(pk=campaign_id)
    if campaign.status not in allowed:
        raise CampaignStateError(f"A {campaign.status} campaign cannot be {action}.")
    return campaign


def campaign_pause(*, campaign_id: int) -> int:
    """Stop the fan-out and hold everything of the campaign not sent yet; returns how
    many notifications and deliveries were held. The deliveries are locked in id order,
    as a sender's claim takes a round's: locked in the join's order, a pause and a claim
    of the same rows could each hold what the other waited for (a deadlock)."""
    with transaction.atomic():
        campaign = _locked(campaign_id, PAUSABLE, "paused")
        Campaign.objects.filter(pk=campaign.pk).update(
            status=CampaignStatus.PAUSED, updated_at=timezone.now()
        )
        params = campaign_params(campaign)
        with connection.cursor() as cursor:
            cursor.execute(
                f"""
                WITH held AS (
                    UPDATE {NOTIFICATIONS} n SET routed_at = %(c_now)s
                     WHERE {campaign_notifications_sql()} AND n.routed_at IS NULL
                    RETURNING n.id
                )
                INSERT INTO {HOLDS} (campaign_id, notification_id, previous_status,
                                     previous_reason)
                SELECT %(c_campaign)s, id, '', '' FROM held
                """,
                params,
            )
            routes = cursor.rowcount
            cursor.execute(
                f"""
                WITH unsent AS (
                    SELECT d.id, d.notification_id, d.status, d.reason, d.next_attempt_at
                      FROM {DELIVERIES} d JOIN {NOTIFICATIONS} n ON n.id = d.notification_id
                     WHERE {campaign_notifications_sql()} AND d.status = ANY(%(unsent)s)
                       AND d.reason <> %(paused)s
                     ORDER BY d.id
                       FOR UPDATE OF d
                ), recorded AS (
                    INSERT INTO {HOLDS} (campaign_id, notification_id, delivery_id,
                                         previous_status, previous_reason,
                                         previous_next_attempt_at)
                    SELECT %(c_campaign)s, notification_id, id, status, reason, next_attempt_at
                      FROM unsent
                    RETURNING delivery_id
                )
                UPDATE {DELIVERIES} d
                   SET status = %(deferred)s, reason = %(paused)s, next_attempt_at = NULL,
                       enqueued_at = NULL, updated_at = %(c_now)s
                 WHERE d.id IN (SELECT delivery_id FROM recorded)
                """,
                {
                    **params,
                    "unsent": list(UNSENT),
                    "deferred": DeliveryStatus.DEFERRED.value,
                    "paused": Reason.CAMPAIGN_PAUSED.value,
                },
            )
            deliveries = cursor.rowcount
    logger.info(
        "campaign %s paused: %s routes and %s deliveries held", campaign_id, routes, deliveries
    )
    return routes + deliveries


def campaign_resume(*, campaign_id: int) -> int:
    """Give back everything the pause held and restart the fan-out if it had not
    finished; returns how many notifications and deliveries were released."""
    enqueue: list[tuple[int, str, str, int]] = []
    with transaction.atomic():
        campaign = _locked(campaign_id, (CampaignStatus.PAUSED,), "resumed")
        now = timezone.now()
        if campaign.fanned_out_at is not None:
            resumed = CampaignStatus.DONE
        elif campaign.send_at is not None and campaign.send_at > now:
            resumed = CampaignStatus.SCHEDULED  # paused before it started: the beat starts it
        else:
            resumed = CampaignStatus.RUNNING
        Campaign.objects.filter(pk=campaign.pk).update(status=resumed, updated_at=now)
        params = campaign_params(campaign)
        step = _paced_step(campaign)
        with connection.cursor() as cursor:
            # A paced campaign's held members take their turns again from now, at its
            # rate, rather than all at once (campaigns/pacing.py): their send_at (their
            # deadlines count from it) and their outbox row's due time.
            cursor.execute(
                f"""
                WITH turns AS (
                    SELECT h.notification_id,
                           row_number() OVER (ORDER BY o.due_at, h.id) - 1 AS turn
                      FROM {HOLDS} h
                      LEFT JOIN {Outbox._meta.db_table} o ON o.notification_id = h.notification_id
                     WHERE h.campaign_id = %(c_campaign)s AND h.delivery_id IS NULL
                ), routes AS (
                    UPDATE {NOTIFICATIONS} n
                       SET routed_at = NULL,
                           send_at = coalesce(%(c_now)s + t.turn::float8 * %(step)s::interval,
                                              n.send_at)
                      FROM turns t
                     WHERE n.id = t.notification_id
                       AND NOT EXISTS (SELECT 1 FROM {DELIVERIES} d
                                        WHERE d.notification_id = n.id)
                    RETURNING n.id, n.send_at
                )
                UPDATE {Outbox._meta.db_table} o
                   SET published_at = NULL, due_at = coalesce(r.send_at, o.due_at)
                  FROM routes r WHERE o.notification_id = r.id
                """,
                {**params, "step": step},
            )
            routes = cursor.rowcount
            cursor.execute(
                f"""
                UPDATE {DELIVERIES} d
                   SET status = h.previous_status, reason = h.previous_reason,
                       next_attempt_at = CASE WHEN h.previous_status = %(queued)s
                                              THEN %(c_now)s
                                              ELSE h.previous_next_attempt_at END,
                       updated_at = %(c_now)s
                  FROM {HOLDS} h
                 WHERE h.campaign_id = %(c_campaign)s AND h.delivery_id = d.id
                   AND d.status = %(deferred)s AND d.reason = %(paused)s
                RETURNING d.id, d.channel, d.queue, d.status, d.attempts
                """,
                {
                    **params,
                    "queued": DeliveryStatus.QUEUED.value,
                    "deferred": DeliveryStatus.DEFERRED.value,
                    "paused": Reason.CAMPAIGN_PAUSED.value,
                },
            )
            released = cursor.fetchall()
        if step is not None:  # the members still to fan out come after the held ones
            Campaign.objects.filter(pk=campaign.pk).update(
                paced_from=params["c_now"] - (campaign.created_count - routes) * step
            )
        CampaignHold.objects.filter(campaign=campaign).delete()
        enqueue = [
            (pk, channel, queue, attempts)
            for pk, channel, queue, status, attempts in released
            if status in (DeliveryStatus.QUEUED, DeliveryStatus.RETRYING)
        ]
        transaction.on_commit(lambda: _enqueue(enqueue))
        if routes:
            # Their outbox rows are given back by an update, which the insert trigger
            # does not see: without a wake-up the relays would find them only at their
            # next poll.
            transaction.on_commit(outbox_wake, robust=True)
        if resumed == CampaignStatus.RUNNING:
            fan_out_publish_on_commit(campaign_id=campaign.pk, checkpoint=campaign.checkpoint)
    logger.info(
        "campaign %s resumed: %s routes and %s deliveries released",
        campaign_id,
        routes,
        len(released),
    )
    return routes + len(released)


def _paced_step(campaign: Campaign) -> timedelta | None:
    """The time between two members of a paced campaign (None: not paced)."""
    if campaign.local_time is not None:
        return None
    rate = campaign_pace(requested=campaign.send_rate, channels=campaign.category.default_channels)
    return None if rate is None else timedelta(seconds=1 / rate)


def _enqueue(rows: list[tuple[int, str, str, int]]) -> None:
    for delivery_id, channel, queue, attempts in rows:
        delivery_enqueue(delivery_id=delivery_id, channel=channel, queue=queue, retry=attempts > 0)


def campaign_cancel(*, campaign_id: int) -> int:
    """Stop the fan-out for good and end every unsent delivery `cancelled`; returns how
    many deliveries were cancelled."""
    with transaction.atomic():
        campaign = _locked(campaign_id, CANCELLABLE, "cancelled")
        now = timezone.now()
        Campaign.objects.filter(pk=campaign.pk).update(
            status=CampaignStatus.CANCELLED, updated_at=now
        )
        params = campaign_params(campaign)
        with connection.cursor() as cursor:
            cursor.execute(
                f"""UPDATE {NOTIFICATIONS} n SET routed_at = %(c_now)s
                     WHERE {campaign_notifications_sql()} AND n.routed_at IS NULL""",
                params,
            )
            cursor.execute(
                f"""
                UPDATE {DELIVERIES} d
                   SET status = %(cancelled)s, reason = %(reason)s, next_attempt_at = NULL,
                       enqueued_at = NULL, finished_at = %(c_now)s, updated_at = %(c_now)s
                  FROM {NOTIFICATIONS} n
                 WHERE n.id = d.notification_id AND {campaign_notifications_sql()}
                   AND d.status = ANY(%(unsent)s)
                """,
                {
                    **params,
                    "cancelled": DeliveryStatus.CANCELLED.value,
                    "reason": Reason.CAMPAIGN_CANCELLED.value,
                    "unsent": list(UNSENT),
                },
            )
            cancelled = cursor.rowcount
        CampaignHold.objects.filter(campaign=campaign).delete()
    logger.info("campaign %s cancelled: %s deliveries", campaign_id, cancelled)
    return cancelled
