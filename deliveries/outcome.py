"""Recording an attempt's outcome: the attempt row and the delivery's next state, written
together, and what follows (a retry message, the category's fallback channel)."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import Enum
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.db.models import F
from django.utils import timezone

from deliveries.channels.base import SendResult
from deliveries.enqueue import delivery_enqueue
from deliveries.fairness import push_slot_member, push_slot_release
from deliveries.models import AttemptOutcome, Delivery, DeliveryAttempt, DeliveryStatus, Reason
from deliveries.ordering import successor_enqueue, successor_wake_sql
from deliveries.outcome_log import delivery_outcome_log
from deliveries.retry import PUSH_CHANNELS, RetryDecision, RetryKind, decide_retry
from deliveries.routing import notification_fallback
from deliveries.suppression import address_suppress

logger = logging.getLogger(__name__)


class AttemptResult(Enum):
    DELIVERED = "delivered"
    RETRY_SCHEDULED = "retry_scheduled"
    FAILED = "failed"
    DEAD = "dead"
    EXPIRED = "expired"
    NOT_CLAIMED = "not_claimed"  # someone else has it, or it is already final
    EARLY = "early"  # the message arrived before next_attempt_at
    SKIPPED_LIVE = "skipped_live"  # the device is on the live stream: no push
    POSTPONED = "postponed"  # breaker open or no rate token: back later, not charged
    HELD = "held"  # an earlier delivery to the same person on this channel is on its way
    SUPERSEDED = "superseded"  # a newer event about the same subject got there first


@dataclass(frozen=True)
class AttemptReport:
    result: AttemptResult
    delivery_id: int


def attempt_record(
    delivery: Delivery,
    result: SendResult,
    *,
    reason: str,
    claimed_at: datetime,
    started_at: datetime,
    duration: int,
    uncharged: bool = False,
    held: int = 0,
) -> AttemptReport:
    """Write the attempt row and the delivery's next state in one transaction (and wake
    the next delivery held behind this one: it is no longer on its way).

    `uncharged`: a failed half-open probe. The provider is still down, so the delivery
    waits out another cool-down like the others, and the try is not counted against
    its budget (a long outage must not kill whichever delivery happened to probe).
    `held`: milliseconds it was held back for an earlier delivery before this try.
    """
    now = timezone.now()
    outcome, changes, countdown = _next_state(delivery, result, reason, uncharged, now)
    if delivery.channel in PUSH_CHANNELS:
        # This job is over; a retry takes a slot again when it is queued (after commit).
        member = push_slot_member(
            channel=delivery.channel,
            delivery_id=delivery.pk,
            notification_id=delivery.notification_id,
        )
        push_slot_release(recipient_id=delivery.notification.recipient_id, member=member)
    with transaction.atomic():
        woken = _attempt_insert_and_wake(
            delivery,
            result,
            started_at=started_at,
            duration=duration,
            held=held,
        )
        if woken is not None:  # the next delivery held behind this one may go now
            transaction.on_commit(
                lambda: successor_enqueue(delivery=delivery, woken=woken[0], queue=woken[1])
            )
        # Only the holder of the current claim writes the outcome; a sweeper may have
        # given a stale claim to someone else meanwhile.
        updated = Delivery.objects.filter(
            pk=delivery.pk,
            accepted_at=delivery.accepted_at,  # one partition to plan and update
            status=DeliveryStatus.SENDING,
            claimed_at=claimed_at,
        ).update(**changes)
        if updated and result.hard_bounce:
            # The address itself is dead: later deliveries to it are not tried.
            address_suppress(
                channel=delivery.channel, address=delivery.target, evidence=_error_text(result)
            )
        if updated and countdown is not None:
            owner = (delivery.notification.recipient_id, delivery.notification_id)
            transaction.on_commit(
                lambda: delivery_enqueue(
                    delivery_id=delivery.pk,
                    channel=delivery.channel,
                    queue=delivery.queue,
                    countdown=countdown,
                    retry=True,
                    push_owner=owner,
                )
            )
        if (
            updated
            and outcome is AttemptResult.DEAD
            and delivery.channel in settings.NOTIFY_FALLBACK_FROM_CHANNELS
        ):
            notification_id, channel = delivery.notification_id, delivery.channel
            transaction.on_commit(
                lambda: notification_fallback(
                    notification_id=notification_id, failed_channel=channel
                )
            )
    if not updated:
        logger.warning(
            "delivery %s: claim was taken over; outcome %s kept as attempt only",
            delivery.pk,
            result.outcome,
        )
    delivery_outcome_log(
        delivery,
        status=changes.get("status", ""),
        reason=changes.get("reason", ""),
        duration=duration,
    )
    return AttemptReport(outcome, delivery.pk)


def _attempt_insert_and_wake(
    delivery: Delivery, result: SendResult, *, started_at: datetime, duration: int, held: int
) -> tuple[int, str] | None:
    """Insert the attempt row and, in the same statement, wake the next delivery held
    behind this one (deliveries/ordering.py); returns the woken (id, queue), if any.

    One statement: per-recipient order costs a send no round trip of its own. The woken
    one's message is published after commit, when this delivery's outcome is visible.
    """
    params: dict[str, Any] = {
        "delivery": delivery.pk,
        "number": delivery.attempts,
        "started_at": started_at,
        "duration": duration,
        "outcome": result.outcome,
        "status_code": result.status_code[:32],
        "response": result.response,
        "held": held,
        "accepted_at": delivery.accepted_at,
    }
    insert = f"""
        INSERT INTO {DeliveryAttempt._meta.db_table}
            (delivery_id, number, started_at, duration_ms, outcome, status_code, response,
             held_ms, accepted_at)
        VALUES (%(delivery)s, %(number)s, %(started_at)s, %(duration)s, %(outcome)s,
                %(status_code)s, %(response)s, %(held)s, %(accepted_at)s)
    """
    wake = successor_wake_sql(delivery=delivery)
    with connection.cursor() as cursor:
        if wake is None:
            cursor.execute(insert, params)
            return None
        wake_sql, wake_params = wake
        # A data-modifying CTE runs exactly once whether or not the query reads it.
        cursor.execute(
            f"WITH woken AS ({wake_sql}), attempt AS ({insert} RETURNING 1) "
            "SELECT woken.id, woken.queue FROM attempt LEFT JOIN woken ON true",
            {**params, **wake_params},
        )
        row = cursor.fetchone()
    return (row[0], row[1]) if row and row[0] is not None else None


def _next_state(
    delivery: Delivery, result: SendResult, reason: str, uncharged: bool, now: datetime
) -> tuple[AttemptResult, dict[str, Any], float | None]:
    """(what happened, the delivery's changes, a retry countdown to publish or None)."""
    changes: dict[str, Any] = {"updated_at": now, "last_error": ""}
    if result.outcome == AttemptOutcome.DELIVERED:
        changes.update(
            status=DeliveryStatus.DELIVERED,
            reason="",
            provider_message_id=result.provider_message_id,
            finished_at=now,
        )
        return AttemptResult.DELIVERED, changes, None
    if result.outcome == AttemptOutcome.PERMANENT:
        changes.update(
            status=DeliveryStatus.FAILED,
            reason=reason or Reason.REJECTED,
            last_error=_error_text(result),
            finished_at=now,
        )
        return AttemptResult.FAILED, changes, None
    if result.give_up:
        decision = RetryDecision(RetryKind.EXHAUSTED)
    elif uncharged:
        cooldown = settings.NOTIFY_BREAKER_COOLDOWN
        decision = RetryDecision(RetryKind.RETRY, cooldown, now + timedelta(seconds=cooldown))
        changes["attempt_budget_from"] = F("attempt_budget_from") + 1
    else:
        decision = decide_retry(
            channel=delivery.channel,
            attempt=delivery.attempts - delivery.attempt_budget_from,
            now=now,
            deadline=delivery.deadline,
            retry_after=result.retry_after,
        )
    changes["last_error"] = _error_text(result)
    if decision.kind is RetryKind.RETRY:
        changes.update(status=DeliveryStatus.RETRYING, next_attempt_at=decision.next_attempt_at)
        if decision.delay <= settings.NOTIFY_RETRY_COUNTDOWN_MAX:
            return AttemptResult.RETRY_SCHEDULED, changes, decision.delay
        changes["enqueued_at"] = None  # no message: the sweeper owns this wait
        return AttemptResult.RETRY_SCHEDULED, changes, None
    if decision.kind is RetryKind.EXHAUSTED:
        changes.update(status=DeliveryStatus.DEAD, reason=Reason.RETRIES_EXHAUSTED, finished_at=now)
        return AttemptResult.DEAD, changes, None
    changes.update(status=DeliveryStatus.EXPIRED, reason=Reason.DEADLINE_PASSED, finished_at=now)
    return AttemptResult.EXPIRED, changes, None


def _error_text(result: SendResult) -> str:
    return f"{result.status_code} {result.response}".strip()
