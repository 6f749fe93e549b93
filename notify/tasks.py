"""Celery tasks of the core: thin wrappers over services."""

from __future__ import annotations

from datetime import timedelta

from celery import shared_task
from django.conf import settings
from django.db.models import Q
from django.utils import timezone

from notify.models import FeedEntry
from notify.unread import unread_reconcile


@shared_task(name="notify.reconcile_unread_counts")
def reconcile_unread_counts() -> int:
    """Beat: repair unread counters of recipients whose feed changed recently."""
    since = timezone.now() - timedelta(seconds=settings.NOTIFY_UNREAD_RECONCILE_WINDOW)
    recipient_ids = (
        FeedEntry.objects.filter(Q(created_at__gte=since) | Q(read_at__gte=since))
        .values_list("recipient_id", flat=True)
        .distinct()
    )
    return unread_reconcile(recipient_ids=recipient_ids.iterator())
