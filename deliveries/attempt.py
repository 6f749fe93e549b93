"""One attempt at one delivery: load, claim, check, call the provider, record.

The delivery row is the write-ahead record: the claim (`queued|retrying → sending`)
makes a duplicate or early message harmless, and the outcome and next attempt are
written before any message about them is published.
"""

from __future__ import annotations

import logging
import time
import traceback
from datetime import datetime
from typing import Any

from django.template import TemplateSyntaxError
from django.utils import timezone

from deliveries.channels import provider_for
from deliveries.channels.base import SendResult
from deliveries.claim import (
    Refusal,
    delivery_claim,
    delivery_claim_refused,
    delivery_load,
    delivery_skip_if_live,
)
from deliveries.fcm_batch import fcm_send_with_siblings
from deliveries.models import AttemptOutcome, Delivery, Reason
from deliveries.ordering import (
    delivery_hold,
    delivery_supersede,
    held_ms,
    newer_delivered,
    successor_wake,
)
from deliveries.outcome import AttemptReport, AttemptResult, attempt_record
from deliveries.pressure import delivery_postpone, provider_admission, provider_outcome
from preferences.gate import gate_seal_valid
from templates_admin.bounds import RenderLimitExceeded
from templates_admin.models import TemplateVersion
from templates_admin.rendering import build_context

logger = logging.getLogger(__name__)


def delivery_attempt(*, delivery_id: int) -> AttemptReport:
    """Run one attempt of a delivery if it is due and unclaimed."""
    now = timezone.now()
    loaded = delivery_load(delivery_id=delivery_id)
    if loaded is None:
        raise Delivery.DoesNotExist(f"delivery {delivery_id} does not exist")
    delivery, version = loaded.delivery, loaded.version
    # A device live on the stream got the notification there; checked before the claim
    # (no claim taken) and right after it (the claim is given back).
    if delivery_skip_if_live(delivery=delivery, claimed_at=None):
        successor_wake(delivery=delivery)  # done with: the next one held behind may go
        return AttemptReport(AttemptResult.SKIPPED_LIVE, delivery_id)
    if not delivery_claim(delivery=delivery, now=now, version=version):
        refusal = delivery_claim_refused(delivery_id=delivery_id, now=now)
        if refusal is Refusal.HELD and delivery_hold(delivery=delivery, now=now):
            return AttemptReport(AttemptResult.HELD, delivery_id)
        return AttemptReport(
            AttemptResult.EARLY if refusal is Refusal.EARLY else AttemptResult.NOT_CLAIMED,
            delivery_id,
        )
    if delivery_skip_if_live(delivery=delivery, claimed_at=now):
        successor_wake(delivery=delivery)
        return AttemptReport(AttemptResult.SKIPPED_LIVE, delivery_id)
    # An older event than one the person already got here about the same subject.
    if newer_delivered(delivery=delivery) and delivery_supersede(delivery=delivery, claimed_at=now):
        successor_wake(delivery=delivery)
        return AttemptReport(AttemptResult.SUPERSEDED, delivery_id)

    started_at = timezone.now()
    clock = time.monotonic()
    reason = ""
    probe_failed = False
    notification = delivery.notification
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
        # Past its deadline (TTL) it is no longer useful: not sent late. Recorded as a
        # failed try, which the retry policy turns into `expired` (the deadline is behind us).
        result = SendResult.transient(
            status_code="deadline", response="past its deadline; not sent"
        )
    else:
        admission = provider_admission(
            channel=delivery.channel, queue=delivery.queue, target=delivery.target
        )
        if not admission.allowed:
            delivery_postpone(
                delivery=delivery,
                claimed_at=now,
                wait_seconds=admission.wait_seconds,
                why=admission.why,
            )
            return AttemptReport(AttemptResult.POSTPONED, delivery.pk)
        recipient = notification.recipient
        context = build_context(
            notification.payload,
            recipient={
                "user_id": recipient.user_id,
                "locale": recipient.locale,
                "timezone": recipient.timezone,
            },
        )
        result, reason = _call_provider(delivery, version, context)
        provider_outcome(breaker=admission.breaker, outcome=result.outcome)
        probe_failed = admission.probe and result.outcome == AttemptOutcome.TRANSIENT
    return attempt_record(
        delivery,
        result,
        reason=reason,
        claimed_at=now,
        started_at=started_at,
        duration=int((time.monotonic() - clock) * 1000),
        uncharged=probe_failed,
        held=held_ms(delivery=delivery, now=now),
    )


def _past_deadline(delivery: Delivery, now: datetime) -> bool:
    """A delivery whose deadline (the TTL, see `delivery_deadline`) has run out."""
    return delivery.deadline is not None and now >= delivery.deadline


def _call_provider(
    delivery: Delivery, version: TemplateVersion, context: dict[str, Any]
) -> tuple[SendResult, str]:
    try:
        if delivery.channel == "fcm":
            return fcm_send_with_siblings(delivery, version, context), ""
        return provider_for(delivery.channel).send(delivery, version, context), ""
    except RenderLimitExceeded as error:  # before TemplateSyntaxError, its base
        return SendResult.permanent(response=f"template error: {error}"), Reason.RENDER_LIMIT
    except TemplateSyntaxError as error:
        return SendResult.permanent(response=f"template error: {error}"), Reason.RENDER_ERROR
    except Exception as error:  # a bug or an unclassified failure: recorded, then retried
        logger.exception("delivery %s: provider raised", delivery.pk)
        text = "".join(traceback.format_exception_only(error)).strip()
        return SendResult.transient(status_code=type(error).__name__, response=text), ""
