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
from deliveries.fairness import (
    push_drop_record,
    push_slot_member,
    push_slot_release,
    push_slot_take,
)
from deliveries.live import device_is_live
from deliveries.models import (
    CLAIMABLE_STATUSES,
    AttemptOutcome,
    Delivery,
    DeliveryAttempt,
    DeliveryStatus,
    Reason,
)
from deliveries.pressure import delivery_postpone, provider_admission, provider_outcome
from deliveries.retry import PUSH_CHANNELS, RetryDecision, RetryKind, decide_retry
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
    SKIPPED_LIVE = "skipped_live"  # the device is on the live stream: no push
    POSTPONED = "postponed"  # breaker open or no rate token: back later, not charged


@dataclass(frozen=True)
class AttemptReport:
    result: AttemptResult
    delivery_id: int


def delivery_enqueue(
    *,
    delivery_id: int,
    channel: str,
    queue: str,
    countdown: float | None = None,
    retry: bool = False,
) -> None:
    """Publish a send message for a delivery and note when (call after commit)."""
    if channel in PUSH_CHANNELS and not _push_slot_admits(
        delivery_id=delivery_id, countdown=countdown, retry=retry
    ):
        return
    priority = settings.NOTIFY_PRIORITY_RETRY if retry else settings.NOTIFY_PRIORITY_FIRST_ATTEMPT
    publish_task(SEND_TASK, args=[delivery_id], queue=queue, countdown=countdown, priority=priority)
    Delivery.objects.filter(pk=delivery_id).update(enqueued_at=timezone.now())


def _push_slot_admits(*, delivery_id: int, countdown: float | None, retry: bool) -> bool:
    """Per-recipient push fairness (R-F2): may this push job be queued now?

    A first attempt without a free slot is dropped at once (suppressed, counted) and
    never reaches a sender; a retry without one is left to the sweeper, which offers it
    again later — a retry slows down rather than disappears.
    """
    row = (
        Delivery.objects.filter(pk=delivery_id, channel__in=PUSH_CHANNELS)
        .values("channel", "notification_id", "notification__recipient_id")
        .first()
    )
    if row is None:
        return True  # not a push
    member = push_slot_member(
        channel=row["channel"], delivery_id=delivery_id, notification_id=row["notification_id"]
    )
    recipient_id = row["notification__recipient_id"]
    if push_slot_take(recipient_id=recipient_id, member=member, hold_for=countdown or 0):
        return True
    now = timezone.now()
    if retry:
        Delivery.objects.filter(pk=delivery_id).update(enqueued_at=None, updated_at=now)
        return False
    dropped = Delivery.objects.filter(pk=delivery_id, status=DeliveryStatus.QUEUED).update(
        status=DeliveryStatus.SUPPRESSED,
        reason=Reason.PUSH_LIMIT,
        next_attempt_at=None,
        finished_at=now,
        updated_at=now,
    )
    if dropped:
        push_drop_record(channel=row["channel"], count=dropped)
    return False


def _skipped_live(*, delivery_id: int, claimed_at: datetime | None) -> bool:
    """End a push delivery as `skipped_live` if its device is connected to the stream.

    With `claimed_at` the caller holds the claim and gives it back (the attempt it
    counted is undone); without, only an unclaimed delivery is skipped.
    """
    row = (
        Delivery.objects.filter(pk=delivery_id, channel__in=PUSH_CHANNELS)
        .values("channel", "target", "notification_id", "notification__recipient_id")
        .first()
    )
    if row is None or not device_is_live(device_id=row["target"]):
        return False
    now = timezone.now()
    rows = Delivery.objects.filter(pk=delivery_id)
    changes: dict[str, Any] = {}
    if claimed_at is None:
        rows = rows.filter(status__in=CLAIMABLE_STATUSES)
    else:
        rows = rows.filter(status=DeliveryStatus.SENDING, claimed_at=claimed_at)
        changes["attempts"] = F("attempts") - 1
    skipped = rows.update(
        status=DeliveryStatus.SKIPPED_LIVE,
        reason="",
        next_attempt_at=None,
        finished_at=now,
        updated_at=now,
        **changes,
    )
    if skipped:
        member = push_slot_member(
            channel=row["channel"], delivery_id=delivery_id, notification_id=row["notification_id"]
        )
        push_slot_release(recipient_id=row["notification__recipient_id"], member=member)
    return bool(skipped)


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
    # R-F4: a device live on the stream got the notification there; checked before the
    # claim (no claim taken) and right after it (the claim is given back).
    if _skipped_live(delivery_id=delivery_id, claimed_at=None):
        return AttemptReport(AttemptResult.SKIPPED_LIVE, delivery_id)
    if not delivery_claim(delivery_id=delivery_id, now=now):
        return _not_claimed(delivery_id, now)
    if _skipped_live(delivery_id=delivery_id, claimed_at=now):
        return AttemptReport(AttemptResult.SKIPPED_LIVE, delivery_id)

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
    probe_failed = False
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
    elif _past_deadline(delivery, started_at):
        # A push past its TTL is no longer useful: not sent late. Recorded as a failed
        # try, which decide_retry turns into `expired` (the deadline is behind us).
        result = SendResult.transient(status_code="deadline", response="past its TTL; not sent")
    else:
        admission = provider_admission(channel=delivery.channel, queue=delivery.queue)
        if not admission.allowed:
            delivery_postpone(
                delivery=delivery,
                claimed_at=now,
                wait_seconds=admission.wait_seconds,
                why=admission.why,
            )
            return AttemptReport(AttemptResult.POSTPONED, delivery.pk)
        context = build_context(
            notification.payload,
            recipient={
                "user_id": recipient.user_id,
                "locale": recipient.locale,
                "timezone": recipient.timezone,
            },
        )
        result, reason = _call_provider(delivery, version, context)
        provider_outcome(provider=admission.provider, outcome=result.outcome)
        probe_failed = admission.probe and result.outcome == AttemptOutcome.TRANSIENT
    duration_ms = int((time.monotonic() - clock) * 1000)
    return _record(
        delivery,
        result,
        reason=reason,
        claimed_at=now,
        started_at=started_at,
        duration=duration_ms,
        uncharged=probe_failed,
    )


def _past_deadline(delivery: Delivery, now: datetime) -> bool:
    """A push whose notification TTL has run out (R-D3); other channels send late."""
    return (
        delivery.channel in PUSH_CHANNELS
        and delivery.deadline is not None
        and now >= delivery.deadline
    )


def _call_provider(delivery: Delivery, version: Any, context: dict[str, Any]):
    try:
        if delivery.channel == "fcm":
            return _fcm_send_with_siblings(delivery, version, context), ""
        return provider_for(delivery.channel).send(delivery, version, context), ""
    except TemplateSyntaxError as error:
        return SendResult.permanent(response=f"template error: {error}"), Reason.RENDER_ERROR
    except Exception as error:  # a bug or an unclassified failure: recorded, then retried
        logger.exception("delivery %s: provider raised", delivery.pk)
        text = "".join(traceback.format_exception_only(error)).strip()
        return SendResult.transient(status_code=type(error).__name__, response=text), ""


def _fcm_send_with_siblings(delivery: Delivery, version: Any, context: dict[str, Any]):
    """Send this FCM delivery together with its notification's other due FCM deliveries.

    One notification's devices share one rendered message, so they go out in one
    `send_each` batch (chunks of ≤ 500) instead of one task each. The siblings are
    claimed here like any delivery (their own send messages then find nothing to do)
    and each gets its own attempt row and outcome; this delivery's result is returned
    to the caller, which records it as usual.
    """
    from deliveries.channels import fcm

    claimed_at = timezone.now()
    candidates = list(
        Delivery.objects.filter(
            notification_id=delivery.notification_id,
            channel="fcm",
            status__in=CLAIMABLE_STATUSES,
        )
        .filter(Q(next_attempt_at__isnull=True) | Q(next_attempt_at__lte=claimed_at))
        .exclude(pk=delivery.pk)
        .order_by("pk")
        .values_list("pk", flat=True)[: settings.NOTIFY_FCM_BATCH_SIZE * 10]
    )
    Delivery.objects.filter(pk__in=candidates, status__in=CLAIMABLE_STATUSES).update(
        status=DeliveryStatus.SENDING,
        claimed_at=claimed_at,
        attempts=F("attempts") + 1,
        updated_at=claimed_at,
    )
    siblings = [
        sibling
        for sibling in Delivery.objects.select_related("notification__recipient").filter(
            pk__in=candidates, status=DeliveryStatus.SENDING, claimed_at=claimed_at
        )
        # R-F4 for every device of the batch: one live on the stream gets no push.
        if not _skipped_live(delivery_id=sibling.pk, claimed_at=claimed_at)
    ]
    gated = [
        sibling
        for sibling in siblings
        if gate_seal_valid(
            notification_id=sibling.notification_id,
            channel=sibling.channel,
            target=sibling.target,
            seal=sibling.gate_seal,
        )
    ]
    if siblings:
        Delivery.objects.filter(pk__in=[s.pk for s in siblings]).update(template_version=version)
    clock = time.monotonic()
    try:
        results = fcm.send_batch([delivery, *gated], version, context)
    except Exception as error:  # recorded for every sibling as well, then retried
        logger.exception("delivery %s: FCM batch raised", delivery.pk)
        text = "".join(traceback.format_exception_only(error)).strip()
        failed = SendResult.transient(status_code=type(error).__name__, response=text)
        results = {d.pk: failed for d in [delivery, *gated]}
    duration = int((time.monotonic() - clock) * 1000)
    refused = SendResult.permanent(response="refused: this delivery did not pass the gate")
    for sibling in siblings:
        sibling_reason = "" if sibling in gated else Reason.NOT_GATED
        _record(
            sibling,
            results.get(sibling.pk, refused),
            reason=sibling_reason,
            claimed_at=claimed_at,
            started_at=claimed_at,
            duration=duration,
        )
    return results[delivery.pk]


def _record(
    delivery: Delivery,
    result: SendResult,
    *,
    reason: str,
    claimed_at: datetime,
    started_at: datetime,
    duration: int,
    uncharged: bool = False,
) -> AttemptReport:
    """Write the attempt row and the delivery's next state in one transaction.

    `uncharged`: a failed half-open probe. The provider is still down, so the delivery
    waits out another cool-down like the others, and the try is not counted against
    its budget (a long outage must not kill whichever delivery happened to probe).
    """
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

    if delivery.channel in PUSH_CHANNELS:
        # This job is over; a retry takes a slot again when it is queued (after commit).
        member = push_slot_member(
            channel=delivery.channel,
            delivery_id=delivery.pk,
            notification_id=delivery.notification_id,
        )
        push_slot_release(recipient_id=delivery.notification.recipient_id, member=member)
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
                    delivery_id=delivery.pk,
                    channel=delivery.channel,
                    queue=delivery.queue,
                    countdown=countdown,
                    retry=True,
                )
            )
        if (
            updated
            and outcome is AttemptResult.DEAD
            and (delivery.channel in settings.NOTIFY_FALLBACK_FROM_CHANNELS)
        ):
            from notify.services import notification_fallback

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
        # The same fields as attributes, for a JSON formatter or a log shipper to index.
        extra={
            "event": "delivery_outcome",
            "notification_id": str(delivery.notification_id),
            "delivery_id": delivery.pk,
            "channel": delivery.channel,
            "status": str(changes.get("status", "")),
            "reason": str(changes.get("reason", "")),
            "attempt": delivery.attempts,
            "duration_ms": duration,
        },
    )
    return AttemptReport(outcome, delivery.pk)


def _error_text(result: SendResult) -> str:
    return f"{result.status_code} {result.response}".strip()


def _not_claimed(delivery_id: int, now: datetime) -> AttemptReport:
    row = (
        Delivery.objects.filter(pk=delivery_id)
        .values("status", "next_attempt_at", "channel", "queue")
        .first()
    )
    if row is None:
        raise Delivery.DoesNotExist(f"delivery {delivery_id} does not exist")
    due = row["next_attempt_at"]
    if row["status"] in CLAIMABLE_STATUSES and due is not None and due > now:
        remaining = (due - now).total_seconds()
        if remaining <= settings.NOTIFY_RETRY_COUNTDOWN_MAX:
            # A redelivered countdown message (worker restart) arrives early: put it back.
            delivery_enqueue(
                delivery_id=delivery_id,
                channel=row["channel"],
                queue=row["queue"],
                countdown=remaining,
                retry=True,
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
        .values_list("pk", "channel", "queue", "attempts")[: settings.NOTIFY_RETRY_SWEEP_BATCH]
    )
    for delivery_id, channel, queue, attempts in due:
        delivery_enqueue(delivery_id=delivery_id, channel=channel, queue=queue, retry=attempts > 0)
    return len(due)
