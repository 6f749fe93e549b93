"""Celery tasks for status webhooks: thin wrappers. Their names are those they had when
they lived in the deliveries app, so messages already queued still find them."""

from __future__ import annotations

from celery import shared_task

from webhooks.events import WEBHOOK_POST_TASK
from webhooks.posting import webhook_events_post, webhook_events_sweep


@shared_task(name=WEBHOOK_POST_TASK)
def webhooks_post(event_ids: list[int]) -> list[str]:
    """Post one endpoint's status webhook events (published on `low`)."""
    return webhook_events_post(event_ids=event_ids)


@shared_task(name="deliveries.webhooks_sweep")
def webhooks_sweep() -> int:
    """Beat: re-queue status webhook events whose retry is due."""
    return webhook_events_sweep()
