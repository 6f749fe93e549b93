"""A producer's webhook endpoints: register, change, rotate the secret, remove, re-enable.

An endpoint's URL passes the egress check (egress/guard.py) when it is
registered or changed, so a private or metadata address is refused before anything is
ever sent there (and it is checked again before each post).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from egress.guard import public_url_check
from notify.models import Producer
from webhooks.events import (
    events_by_endpoint,
    subscription_cache_clear,
    webhook_posts_publish,
)
from webhooks.models import (
    WebhookEndpoint,
    WebhookEvent,
    WebhookEventStatus,
    WebhookSubscription,
)
from webhooks.signing import secret_new


class EndpointLimitReached(Exception):
    """The producer has NOTIFY_WEBHOOK_MAX_ENDPOINTS endpoints already."""


def endpoint_url_check(url: str) -> None:
    """Raise EndpointRefused unless the URL is one we may post to."""
    public_url_check(url, allowed_private=settings.NOTIFY_WEBHOOK_ALLOWED_PRIVATE_ORIGINS)


def endpoint_create(
    *, producer: Producer, url: str, event_types: Sequence[str], description: str = ""
) -> WebhookEndpoint:
    """Register an endpoint for these event types, with a fresh secret."""
    endpoint_url_check(url)
    with transaction.atomic():
        # Counted under the producer's row lock, so two requests cannot both pass.
        Producer.objects.select_for_update().filter(pk=producer.pk).first()
        if producer.webhook_endpoints.count() >= settings.NOTIFY_WEBHOOK_MAX_ENDPOINTS:
            raise EndpointLimitReached
        endpoint = WebhookEndpoint.objects.create(
            producer=producer, url=url, description=description, secret=secret_new()
        )
        _subscriptions_set(endpoint, event_types)
    subscription_cache_clear()
    return endpoint


def endpoint_update(
    *,
    endpoint: WebhookEndpoint,
    url: str | None = None,
    event_types: Sequence[str] | None = None,
    description: str | None = None,
) -> WebhookEndpoint:
    """Change what is given; a new URL passes the egress check first."""
    if url is not None:
        endpoint_url_check(url)
        endpoint.url = url
    if description is not None:
        endpoint.description = description
    with transaction.atomic():
        endpoint.save()
        if event_types is not None:
            _subscriptions_set(endpoint, event_types)
    subscription_cache_clear()
    return endpoint


def endpoint_secret_rotate(
    *, endpoint: WebhookEndpoint, now: datetime | None = None
) -> WebhookEndpoint:
    """A new secret signs from now on; the old one signs beside it for
    NOTIFY_WEBHOOK_SECRET_OVERLAP seconds, so the receiver can switch without a gap."""
    now = now or timezone.now()
    endpoint.previous_secret = endpoint.secret
    endpoint.previous_secret_until = now + timedelta(seconds=settings.NOTIFY_WEBHOOK_SECRET_OVERLAP)
    endpoint.secret = secret_new()
    endpoint.save(
        update_fields=["secret", "previous_secret", "previous_secret_until", "updated_at"]
    )
    return endpoint


def endpoint_delete(*, endpoint: WebhookEndpoint) -> None:
    """Remove the endpoint with its subscriptions, events and attempts."""
    endpoint.delete()
    subscription_cache_clear()


def endpoint_enable(*, endpoint: WebhookEndpoint) -> int:
    """Re-enable an endpoint (after its owner fixed it): its failure count starts over
    and the events that waited (those written while it was disabled among them) are
    posted now, each notification's in one message, so the events about one delivery
    arrive in their sequence. Returns how many were re-queued."""
    now = timezone.now()
    with transaction.atomic():
        WebhookEndpoint.objects.filter(pk=endpoint.pk).update(
            active=True,
            disabled_reason="",
            disabled_at=None,
            failures_in_row=0,
            failing_since=None,
            updated_at=now,
        )
        waiting = list(
            WebhookEvent.objects.filter(
                endpoint=endpoint, status=WebhookEventStatus.PENDING
            ).values_list("pk", "endpoint_id", "notification_id")
        )
        WebhookEvent.objects.filter(endpoint=endpoint, status=WebhookEventStatus.PENDING).update(
            next_attempt_at=now, enqueued_at=now
        )
        if waiting:
            by_endpoint, groups = events_by_endpoint(waiting)
            transaction.on_commit(
                lambda: webhook_posts_publish(by_endpoint=by_endpoint, groups=groups)
            )
    endpoint.refresh_from_db()
    subscription_cache_clear()
    return len(waiting)


def _subscriptions_set(endpoint: WebhookEndpoint, event_types: Sequence[str]) -> None:
    wanted = set(event_types)
    endpoint.subscriptions.exclude(event_type__in=wanted).delete()
    WebhookSubscription.objects.bulk_create(
        [
            WebhookSubscription(endpoint=endpoint, producer_id=endpoint.producer_id, event_type=t)
            for t in sorted(wanted)
        ],
        ignore_conflicts=True,
    )
