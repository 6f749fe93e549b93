"""Celery tasks for deliveries: thin wrappers that pass ids to services."""

from __future__ import annotations

from celery import shared_task
from celery.exceptions import Reject

from deliveries.attempt import delivery_attempt
from deliveries.outcome import AttemptResult
from deliveries.release import deferred_release
from deliveries.routing import notification_route
from deliveries.sweep import sweep_due_deliveries


@shared_task(name="deliveries.route")
def route(notification_id: str) -> int:
    """Gate the notification, create its deliveries, and start sending them."""
    return len(notification_route(notification_id=notification_id))


@shared_task(name="deliveries.send")
def send(delivery_id: int) -> str:
    """One attempt at one delivery. A delivery that ends dead is dead-lettered."""
    report = delivery_attempt(delivery_id=delivery_id)
    if report.result is AttemptResult.DEAD:
        # acks_late + acks_on_failure_or_timeout=False: RabbitMQ routes this message to
        # the dead-letter exchange, where an operator can see and re-drive it.
        raise Reject(f"delivery {delivery_id}: retries exhausted", requeue=False)
    return report.result.value


@shared_task(name="deliveries.sweep_due_retries")
def sweep_due_retries() -> int:
    """Beat: republish overdue deliveries and recover claims of lost workers."""
    return sweep_due_deliveries()


@shared_task(name="deliveries.release_deferred")
def release_deferred() -> int:
    """Beat: deliveries deferred by quiet hours pass the gate again once the window ends."""
    return deferred_release()
