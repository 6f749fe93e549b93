"""Sending one delivery: claim, render, call the provider, record, schedule what is next.

The delivery row is the write-ahead record: a sender claims it with a conditional
UPDATE (`queued|retrying → sending`), so a duplicate or early message never sends
twice; the outcome and the next attempt are written before any message about it is
published; the sweeper turns overdue rows back into messages.
"""

from __future__ import annotations

import logging
import time
import traceback
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import Enum
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import F, Q
from django.template import TemplateSyntaxError
from django.utils import timezone

from deliveries.channels import provider_for
from deliveries.channels.base import SendResult
from deliveries.models import (
    CLAIMABLE_STATUSES,
    AttemptOutcome,
    Delivery,
    DeliveryAttempt,
    DeliveryStatus,
    Reason,
)
from deliveries.retry import RetryKind, decide_retry
from notify.broker import publish_task
from preferences.gate import gate_seal_valid
from templates_admin.rendering import build_context
from templates_admin.selectors import published_version_for

logger = logging.getLogger(__name__)

SEND_TASK = "deliveries.send"


class AttemptResult(Enum):
    DELIVERED = "delivered"
    RETRY_SCHEDULED = "retry_scheduled"
    FAILED = "failed"
    DEAD = "dead"
    EXPIRED = "expired"
    NOT_CLAIMED = "not_claimed"  # someone else has it, or it is already final
    EARLY = "early"  # the message arrived before next_attempt_at


@dataclass(frozen=True)
class AttemptReport:
    result: AttemptResult
    delivery_id: int


def delivery_enqueue(
    *, delivery_id: int, queue: str, countdown: float | None = None, retry: bool = False
) -> None:
    """Publish a send message for a delivery and note when (call after commit)."""
    priority = settings.NOTIFY_PRIORITY_RETRY if retry else settings.NOTIFY_PRIORITY_FIRST_ATTEMPT
    publish_task(SEND_TASK, args=[delivery_id], queue=queue, countdown=countdown, priority=priority)
    Delivery.objects.filter(pk=delivery_id).update(enqueued_at=timezone.now())


def delivery_claim(*, delivery_id: int, now: datetime) -> bool:
    """Take the delivery for one attempt; False when it is not ours to send now."""
    claimed = (
        Delivery.objects.filter(pk=delivery_id, status__in=CLAIMABLE_STATUSES)
        .filter(Q(next_attempt_at__isnull=True) | Q(next_attempt_at__lte=now))
        .update(
            status=DeliveryStatus.SENDING,
            claimed_at=now,
            attempts=F("attempts") + 1,
            updated_at=now,
        )
    )
    return claimed == 1


def delivery_attempt(*, delivery_id: int) -> AttemptReport:
    """Run one attempt of a delivery if it is due and unclaimed."""
    now = timezone.now()
    if not delivery_claim(delivery_id=delivery_id, now=now):
        return _not_claimed(delivery_id, now)

    delivery = Delivery.objects.select_related(
        "notification__recipient", "notification__category", "template_version__template"
    ).get(pk=delivery_id)
    notification = delivery.notification
    recipient = notification.recipient

    version = delivery.template_version
    if version is None:
        version = published_version_for(
            category_id=notification.category_id,
            channel=delivery.channel,
            locale=recipient.locale,
        )
        if version is not None:
            # Pinned on the first attempt: retries and history show the text that was used.
            Delivery.objects.filter(pk=delivery.pk).update(template_version=version)
            delivery.template_version = version

    started_at = timezone.now()
    clock = time.monotonic()
    reason = ""
    if not gate_seal_valid(
        notification_id=notification.pk,
        channel=delivery.channel,
        target=delivery.target,
        seal=delivery.gate_seal,
    ):
        result = SendResult.permanent(response="refused: this delivery did not pass the gate")
        reason = Reason.NOT_GATED
    elif version is None:
        result = SendResult.permanent(response="no published template for this channel")
        reason = Reason.NO_TEMPLATE
    else:
        context = build_context(
            notification.payload,
            recipient={
                "user_id": recipient.user_id,
                "locale": recipient.locale,
                "timezone": recipient.timezone,
            },
        )
        result, reason = _call_provider(delivery, version, context)
    duration_ms = int((time.monotonic() - clock) * 1000)
    return _record(
        delivery, result, reason=reason, claimed_at=now, started_at=started_at, duration=duration_ms
    )


def _call_provider(delivery: Delivery, version: Any, context: dict[str, Any]):
    try:
        return provider_for(delivery.channel).send(delivery, version, context), ""
    except TemplateSyntaxError as error:
        return SendResult.permanent(response=f"template error: {error}"), Reason.RENDER_ERROR
    except Exception as error:  # a bug or an unclassified failure: recorded, then retried
        logger.exception("delivery %s: provider raised", delivery.pk)
        text = "".join(traceback.format_exception_only(error)).strip()
        return SendResult.transient(status_code=type(error).__name__, response=text), ""


def _record(
    delivery: Delivery,
    result: SendResult,
    *,
    reason: str,
    claimed_at: datetime,
    started_at: datetime,
    duration: int,
) -> AttemptReport:
    now = timezone.now()
    changes: dict[str, Any] = {"updated_at": now, "last_error": ""}
    countdown: float | None = None
    if result.outcome == AttemptOutcome.DELIVERED:
        outcome = AttemptResult.DELIVERED
        changes.update(
            status=DeliveryStatus.DELIVERED,
            reason="",
            provider_message_id=result.provider_message_id,
            finished_at=now,
        )
    elif result.outcome == AttemptOutcome.PERMANENT:
        outcome = AttemptResult.FAILED
        changes.update(
            status=DeliveryStatus.FAILED,
            reason=reason or Reason.REJECTED,
            last_error=_error_text(result),
            finished_at=now,
        )
    else:
        decision = decide_retry(
            channel=delivery.channel,
            attempt=delivery.attempts,
            now=now,
            deadline=delivery.deadline,
            retry_after=result.retry_after,
        )
        changes["last_error"] = _error_text(result)
        if decision.kind is RetryKind.RETRY:
            outcome = AttemptResult.RETRY_SCHEDULED
            changes.update(status=DeliveryStatus.RETRYING, next_attempt_at=decision.next_attempt_at)
            if decision.delay <= settings.NOTIFY_RETRY_COUNTDOWN_MAX:
                countdown = decision.delay
            else:
                changes["enqueued_at"] = None  # no message: the sweeper owns this wait
        elif decision.kind is RetryKind.EXHAUSTED:
            outcome = AttemptResult.DEAD
            changes.update(
                status=DeliveryStatus.DEAD, reason=Reason.RETRIES_EXHAUSTED, finished_at=now
            )
        else:
            outcome = AttemptResult.EXPIRED
            changes.update(
                status=DeliveryStatus.EXPIRED, reason=Reason.DEADLINE_PASSED, finished_at=now
            )

    with transaction.atomic():
        DeliveryAttempt.objects.create(
            delivery=delivery,
            number=delivery.attempts,
            started_at=started_at,
            duration_ms=duration,
            outcome=result.outcome,
            status_code=result.status_code[:32],
            response=result.response,
        )
        # Only the holder of the current claim writes the outcome; a sweeper may have
        # given a stale claim to someone else meanwhile.
        updated = Delivery.objects.filter(
            pk=delivery.pk, status=DeliveryStatus.SENDING, claimed_at=claimed_at
        ).update(**changes)
        if updated and countdown is not None:
            transaction.on_commit(
                lambda: delivery_enqueue(
                    delivery_id=delivery.pk, queue=delivery.queue, countdown=countdown, retry=True
                )
            )
    if not updated:
        logger.warning(
            "delivery %s: claim was taken over; outcome %s kept as attempt only",
            delivery.pk,
            result.outcome,
        )
    logger.info(
        "delivery outcome notification=%s delivery=%s channel=%s status=%s reason=%s "
        "attempt=%s duration_ms=%s",
        delivery.notification_id,
        delivery.pk,
        delivery.channel,
        changes.get("status", ""),
        changes.get("reason", ""),
        delivery.attempts,
        duration,
    )
    return AttemptReport(outcome, delivery.pk)


def _error_text(result: SendResult) -> str:
    return f"{result.status_code} {result.response}".strip()


def _not_claimed(delivery_id: int, now: datetime) -> AttemptReport:
    row = (
        Delivery.objects.filter(pk=delivery_id).values("status", "next_attempt_at", "queue").first()
    )
    if row is None:
        raise Delivery.DoesNotExist(f"delivery {delivery_id} does not exist")
    due = row["next_attempt_at"]
    if row["status"] in CLAIMABLE_STATUSES and due is not None and due > now:
        remaining = (due - now).total_seconds()
        if remaining <= settings.NOTIFY_RETRY_COUNTDOWN_MAX:
            # A redelivered countdown message (worker restart) arrives early: put it back.
            delivery_enqueue(
                delivery_id=delivery_id, queue=row["queue"], countdown=remaining, retry=True
            )
        return AttemptReport(AttemptResult.EARLY, delivery_id)
    return AttemptReport(AttemptResult.NOT_CLAIMED, delivery_id)


def sweep_due_deliveries(*, now: datetime | None = None) -> int:
    """Recover stale claims and republish overdue deliveries whose message was lost.

    Returns how many send messages were published.
    """
    now = now or timezone.now()
    stale_before = now - timedelta(seconds=settings.NOTIFY_SEND_CLAIM_TIMEOUT)
    recovered = Delivery.objects.filter(
        status=DeliveryStatus.SENDING, claimed_at__lt=stale_before
    ).update(
        status=DeliveryStatus.RETRYING,
        next_attempt_at=now,
        enqueued_at=None,
        last_error="claim expired: the worker was lost during the send",
        updated_at=now,
    )
    if recovered:
        logger.warning("recovered %s deliveries whose sender was lost", recovered)

    due_before = now - timedelta(seconds=settings.NOTIFY_RETRY_SWEEP_GRACE)
    resent_before = now - timedelta(seconds=settings.NOTIFY_RETRY_RESWEEP_AFTER)
    due = list(
        Delivery.objects.filter(status__in=CLAIMABLE_STATUSES, next_attempt_at__lte=due_before)
        .filter(Q(enqueued_at__isnull=True) | Q(enqueued_at__lte=resent_before))
        .order_by("next_attempt_at")
        .values_list("pk", "queue", "attempts")[: settings.NOTIFY_RETRY_SWEEP_BATCH]
    )
    for delivery_id, queue, attempts in due:
        delivery_enqueue(delivery_id=delivery_id, queue=queue, retry=attempts > 0)
    return len(due)
