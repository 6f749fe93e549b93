"""The sweepers: recover claims of lost senders and resend overdue deliveries whose
message was lost, and route again notifications whose route message was lost. The
delivery row and the notification's `routed_at` are the write-ahead record; this makes
it so. A claim is given back a bounded number of times, and never past its deadline:
a send that keeps killing its worker ends dead rather than killing workers forever."""

from __future__ import annotations

import logging
import math
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import F, Q
from django.utils import timezone

from deliveries.channels.base import SendResult
from deliveries.models import CLAIMABLE_STATUSES, Delivery, DeliveryStatus, Reason
from deliveries.pipeline.claim import deliveries_load
from deliveries.pipeline.enqueue import ROUTE_TASK, delivery_dead_letter, delivery_enqueue
from deliveries.pipeline.outcome import AttemptReport, AttemptResult, Tried, attempts_record
from deliveries.pipeline.retry import RetryKind, decide_claim_recovery
from deliveries.pipeline.routing import deliveries_fallback
from deliveries.pipeline.sent_marks import sent_marks_read
from notify.broker import publish_task
from notify.models import Outbox

logger = logging.getLogger(__name__)

# The longest try an attempt row can record (its duration_ms is a 32-bit integer).
_DURATION_MS_MAX = 2**31 - 1


def sweep_due_deliveries(*, now: datetime | None = None) -> int:
    """Recover stale claims and republish overdue deliveries whose message was lost.

    Returns how many send messages were published.
    """
    now = now or timezone.now()
    stale_before = now - timedelta(seconds=settings.NOTIFY_SEND_CLAIM_TIMEOUT)
    stale_claims_settle_sent(stale_before=stale_before)
    stale_claims_end(stale_before=stale_before, now=now)
    recovered = (
        Delivery.objects.filter(status=DeliveryStatus.SENDING, claimed_at__lt=stale_before)
        .exclude(_recovery_ends(now))
        .update(
            status=DeliveryStatus.RETRYING,
            next_attempt_at=now,
            enqueued_at=None,
            last_error="claim expired: the worker was lost during the send",
            claim_recoveries=F("claim_recoveries") + 1,
            updated_at=now,
        )
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


def stale_claims_settle_sent(*, stale_before: datetime) -> int:
    """Stale claims whose message a provider took (a batch's worker died before its
    round was recorded, see deliveries/pipeline/sent_marks.py) end delivered, not sent again.
    Returns how many were settled."""
    stale = list(
        Delivery.objects.filter(
            status=DeliveryStatus.SENDING, claimed_at__lt=stale_before
        ).values_list("pk", "claimed_at")[: settings.NOTIFY_RETRY_SWEEP_BATCH]
    )
    sent = sent_marks_read(claims=stale)
    if not sent:
        return 0
    claimed = dict(stale)
    loaded = deliveries_load(delivery_ids=list(sent))
    tries = [
        Tried(
            item.delivery,
            SendResult.delivered(provider_message_id=sent[pk], response="settled by the sweeper"),
            "",
            claimed_at=claimed[pk],
            started_at=claimed[pk],
            duration=0,
        )
        for pk, item in loaded.items()
    ]
    attempts_record(tries)
    logger.warning("settled %s deliveries sent before their sender was lost", len(tries))
    return len(tries)


def _recovery_ends(now: datetime) -> Q:
    """The stale claims `decide_claim_recovery` ends rather than gives back, as a filter:
    given back NOTIFY_CLAIM_RECOVERIES_MAX times already, or past their deadline."""
    return Q(claim_recoveries__gte=settings.NOTIFY_CLAIM_RECOVERIES_MAX) | Q(deadline__lte=now)


def stale_claims_end(*, stale_before: datetime, now: datetime) -> list[AttemptReport]:
    """Stale claims that are not given back again end as a try that failed for good: an
    attempt row saying the sender was lost, then `dead` (`claim_recovered_too_often`)
    or, past the deadline, `expired` (`decide_claim_recovery`). A dead one gets its dead
    letter and its category's fallback channel, as one a sender ends dead does.

    The rows are locked while their outcome is written, so two sweeps never end one
    twice. Returns the reports of those ended.
    """
    with transaction.atomic():
        ending = list(
            Delivery.objects.select_for_update(skip_locked=True)
            .filter(status=DeliveryStatus.SENDING, claimed_at__lt=stale_before)
            .filter(_recovery_ends(now))
            .values_list("pk", flat=True)[: settings.NOTIFY_RETRY_SWEEP_BATCH]
        )
        if not ending:
            return []
        loaded = deliveries_load(delivery_ids=ending)
        reports = attempts_record([_lost_try(item.delivery, now) for item in loaded.values()])
    dead = [report for report in reports if report.result is AttemptResult.DEAD]
    for report in dead:
        delivery_dead_letter(delivery_id=report.delivery_id, queue=report.queue)
    deliveries_fallback(reports=dead)
    logger.warning("ended %s deliveries whose sender was lost (%s dead)", len(reports), len(dead))
    return reports


def _lost_try(delivery: Delivery, now: datetime) -> Tried:
    """The try a lost sender left behind, from its claim until `now`, as it is recorded
    when the claim is not given back again."""
    recoveries = delivery.claim_recoveries
    kind = decide_claim_recovery(recoveries=recoveries, now=now, deadline=delivery.deadline)
    response = (
        f"the worker was lost during the send; its claim was given back {recoveries} "
        f"time(s) before and is not given back again"
    )
    claimed_at = delivery.claimed_at or now
    # Rounded up, so the try ends at `now` or later: past the deadline the retry policy
    # then says `expired`, as it does for a sender's try found past its deadline.
    duration = math.ceil((now - claimed_at).total_seconds() * 1000)
    if kind is RetryKind.EXHAUSTED:
        result = SendResult.transient(status_code="claim_lost", response=response, give_up=True)
        reason = Reason.CLAIM_RECOVERED_TOO_OFTEN
    else:
        result, reason = SendResult.transient(status_code="claim_lost", response=response), ""
    return Tried(
        delivery,
        result,
        reason,
        claimed_at=claimed_at,
        started_at=claimed_at,
        duration=max(0, min(duration, _DURATION_MS_MAX)),
    )


def sweep_unrouted_notifications(*, now: datetime | None = None) -> int:
    """Publish the route task again for notifications still unrouted long after it was
    published (the message was lost, or dead-lettered after its retries).

    Each is published again at most every NOTIFY_ROUTE_SWEEP_AFTER and up to
    NOTIFY_ROUTE_SWEEP_MAX_PUBLISHES publishes in all; routing twice is a no-op, so a
    late original message does no harm. Returns how many were published.
    """
    now = now or timezone.now()
    stale = now - timedelta(seconds=settings.NOTIFY_ROUTE_SWEEP_AFTER)
    oldest = now - timedelta(seconds=settings.NOTIFY_ROUTE_SWEEP_WINDOW)
    with transaction.atomic():
        rows = list(
            Outbox.objects.select_for_update(skip_locked=True, of=("self",))
            .filter(
                notification__routed_at__isnull=True,
                notification__created_at__range=(oldest, stale),
                published_at__lte=stale,
                publish_attempts__lt=settings.NOTIFY_ROUTE_SWEEP_MAX_PUBLISHES,
            )
            .order_by("published_at")
            .values_list("pk", "notification_id", "queue")[: settings.NOTIFY_ROUTE_SWEEP_BATCH]
        )
        for _, notification_id, queue in rows:
            publish_task(ROUTE_TASK, args=[str(notification_id)], queue=queue,
                         priority=settings.NOTIFY_PRIORITY_RETRY)  # fmt: skip
        Outbox.objects.filter(pk__in=[pk for pk, _, _ in rows]).update(
            published_at=now, publish_attempts=F("publish_attempts") + 1
        )
    if rows:
        logger.warning("republished the route of %s notifications left unrouted", len(rows))
    return len(rows)
