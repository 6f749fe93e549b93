"""Celery tasks for deliveries: thin wrappers that pass ids to services."""

from __future__ import annotations

import logging

from celery import Task, shared_task
from celery.exceptions import Reject
from django.conf import settings

from deliveries.attempt import delivery_attempt
from deliveries.counts import delivery_counts_fold
from deliveries.outcome import AttemptResult
from deliveries.release import deferred_release
from deliveries.retry import jittered, route_backoff
from deliveries.routing import notification_route
from deliveries.sweep import sweep_due_deliveries, sweep_unrouted_notifications
from notify.counts import accepted_counts_fold
from notify.models import Notification

logger = logging.getLogger(__name__)


# max_retries=None: the limit is NOTIFY_ROUTE_MAX_RETRIES, checked in the task itself.
@shared_task(name="deliveries.route", bind=True, max_retries=None)
def route(self: Task, notification_id: str) -> int:
    """Gate the notification, create its deliveries, and start sending them.

    Routing is one transaction, so a route that raises (the database away, a bug) left
    nothing behind: it is retried with a jittered, growing countdown, and after
    NOTIFY_ROUTE_MAX_RETRIES its message is dead-lettered for an operator.
    """
    try:
        return len(notification_route(notification_id=notification_id))
    except Notification.DoesNotExist:
        # Gone (erased, or never committed): nothing to route, and retrying changes nothing.
        logger.warning("notification %s: no such notification; nothing to route",
                       notification_id)  # fmt: skip
        return 0
    except Exception as error:
        retries = self.request.retries
        if retries >= settings.NOTIFY_ROUTE_MAX_RETRIES:
            logger.exception("notification %s: routing failed %s times", notification_id,
                             retries + 1)  # fmt: skip
            why = f"notification {notification_id}: routing failed"
            raise Reject(why, requeue=False) from error
        countdown = jittered(route_backoff(retries + 1), jitter=settings.NOTIFY_RETRY_JITTER)
        logger.warning("notification %s: routing raised %r; retry in %.1f s", notification_id,
                       error, countdown)  # fmt: skip
        raise self.retry(exc=error, countdown=countdown) from error


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


@shared_task(name="deliveries.sweep_unrouted")
def sweep_unrouted() -> int:
    """Beat: publish the route task again for notifications long left unrouted."""
    return sweep_unrouted_notifications()


@shared_task(name="deliveries.release_deferred")
def release_deferred() -> int:
    """Beat: deliveries deferred by quiet hours pass the gate again once the window ends."""
    return deferred_release()


@shared_task(name="deliveries.metrics_counts_fold")
def metrics_counts_fold() -> dict[str, int]:
    """Beat: fold what changed since the last run into the /metrics rollups."""
    return {"accepted": accepted_counts_fold(), "deliveries": delivery_counts_fold()}
