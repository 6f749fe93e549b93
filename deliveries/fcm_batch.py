"""FCM batching: one notification's due FCM deliveries go out in one `send_each` call."""

from __future__ import annotations

import logging
import time
import traceback
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db.models import F, Q
from django.template import TemplateSyntaxError
from django.utils import timezone

from deliveries.channels import fcm
from deliveries.channels.base import SendResult
from deliveries.claim import delivery_skip_if_live
from deliveries.models import CLAIMABLE_STATUSES, Delivery, DeliveryStatus, Reason
from deliveries.outcome import attempt_record
from preferences.gate import gate_seal_valid
from templates_admin.bounds import RenderLimitExceeded
from templates_admin.models import TemplateVersion

logger = logging.getLogger(__name__)


def fcm_send_with_siblings(
    delivery: Delivery, version: TemplateVersion, context: dict[str, Any]
) -> SendResult:
    """Send this FCM delivery together with its notification's other due FCM deliveries.

    One notification's devices share one rendered message, so they go out in one
    `send_each` batch (chunks of ≤ NOTIFY_FCM_BATCH_SIZE) instead of one task each. The
    siblings are claimed here like any delivery (their own send messages then find
    nothing to do) and each gets its own attempt row and outcome; this delivery's result
    is returned to the caller, which records it as usual.
    """
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
        template_version=version,
    )
    siblings = [
        sibling
        for sibling in Delivery.objects.select_related("notification__recipient").filter(
            pk__in=candidates, status=DeliveryStatus.SENDING, claimed_at=claimed_at
        )
        # A device live on the stream gets no push, in a batch as alone.
        if not delivery_skip_if_live(delivery=sibling, claimed_at=claimed_at)
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
    clock = time.monotonic()
    try:
        results = fcm.send_batch([delivery, *gated], version, context)
    except TemplateSyntaxError as error:
        # The one rendered message is broken for every device: each sibling fails with
        # the reason this delivery gets from the caller, not retried.
        reason = (
            Reason.RENDER_LIMIT if isinstance(error, RenderLimitExceeded) else Reason.RENDER_ERROR
        )
        _record_render_failure(siblings, gated, error, reason, claimed_at)
        raise
    except Exception as error:  # recorded for every sibling as well, then retried
        logger.exception("delivery %s: FCM batch raised", delivery.pk)
        text = "".join(traceback.format_exception_only(error)).strip()
        failed = SendResult.transient(status_code=type(error).__name__, response=text)
        results = {d.pk: failed for d in [delivery, *gated]}
    duration = int((time.monotonic() - clock) * 1000)
    refused = SendResult.permanent(response="refused: this delivery did not pass the gate")
    for sibling in siblings:
        attempt_record(
            sibling,
            results.get(sibling.pk, refused),
            reason="" if sibling in gated else Reason.NOT_GATED,
            claimed_at=claimed_at,
            started_at=claimed_at,
            duration=duration,
        )
    return results[delivery.pk]


def _record_render_failure(
    siblings: list[Delivery],
    gated: list[Delivery],
    error: Exception,
    reason: str,
    claimed_at: datetime,
) -> None:
    failed = SendResult.permanent(response=f"template error: {error}")
    refused = SendResult.permanent(response="refused: this delivery did not pass the gate")
    for sibling in siblings:
        attempt_record(
            sibling,
            failed if sibling in gated else refused,
            reason=reason if sibling in gated else Reason.NOT_GATED,
            claimed_at=claimed_at,
            started_at=claimed_at,
            duration=0,
        )
