"""Re-delivering status webhook events whose retry schedule ran out (`failed`).

A receiver down for longer than the whole schedule (NOTIFY_WEBHOOK_RETRY_DELAYS, ~35 h)
leaves its events `failed`. Its owner re-drives them, by time or by `webhook-id`
(`POST /v1/webhooks/{id}/redeliver`, or the admin actions): they are pending again with
the whole schedule ahead of them, and posted now, each notification's events in one
message, so the events about one delivery arrive in their sequence.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from django.conf import settings
from django.db import transaction
from django.db.models import F
from django.utils import timezone

from webhooks.events import events_by_endpoint, webhook_posts_publish
from webhooks.models import WebhookEndpoint, WebhookEvent, WebhookEventStatus


class EndpointDisabled(Exception):
    """The endpoint is disabled: re-enable it first (what it missed is then posted too)."""


@dataclass(frozen=True)
class Redelivered:
    """How many failed events were queued again, and whether more are left."""

    queued: int
    more: bool


def failed_events_redeliver(
    *,
    endpoint: WebhookEndpoint,
    since: datetime | None = None,
    until: datetime | None = None,
    msg_ids: Sequence[str] | None = None,
    limit: int | None = None,
) -> Redelivered:
    """Queue the endpoint's failed events written in [`since`, `until`) and, when given,
    among `msg_ids` (their `webhook-id`s) again: the oldest `limit` of them
    (NOTIFY_WEBHOOK_REDELIVER_MAX). Each gets the whole retry schedule again. Events not
    failed (on their way, or delivered) and ids of other endpoints are left alone.
    Raises EndpointDisabled for a disabled endpoint."""
    if not WebhookEndpoint.objects.filter(pk=endpoint.pk, active=True).exists():
        raise EndpointDisabled
    limit = settings.NOTIFY_WEBHOOK_REDELIVER_MAX if limit is None else limit
    failed = WebhookEvent.objects.filter(endpoint=endpoint, status=WebhookEventStatus.FAILED)
    if since is not None:
        failed = failed.filter(created_at__gte=since)
    if until is not None:
        failed = failed.filter(created_at__lt=until)
    if msg_ids is not None:
        failed = failed.filter(msg_id__in=list(msg_ids))
    chosen = list(
        failed.order_by("created_at", "pk").values_list("pk", "notification_id")[: limit + 1]
    )
    more = len(chosen) > limit
    chosen = chosen[:limit]
    now = timezone.now()
    with transaction.atomic():
        # Only what is still failed: a concurrent re-delivery queues each event once.
        queued = list(
            WebhookEvent.objects.filter(
                pk__in=[pk for pk, _ in chosen], status=WebhookEventStatus.FAILED
            )
            .select_for_update(skip_locked=True)
            .values_list("pk", flat=True)
        )
        WebhookEvent.objects.filter(pk__in=queued).update(
            status=WebhookEventStatus.PENDING,
            attempts_before_redrive=F("attempts"),
            next_attempt_at=now,
            enqueued_at=now,
            claimed_at=None,
            finished_at=None,
        )
        groups = dict(chosen)
        by_endpoint, groups = events_by_endpoint((pk, endpoint.pk, groups[pk]) for pk in queued)
        if queued:
            transaction.on_commit(
                lambda: webhook_posts_publish(by_endpoint=by_endpoint, groups=groups)
            )
    return Redelivered(queued=len(queued), more=more)
