"""Celery tasks for deliveries: thin wrappers that pass ids to services."""

from __future__ import annotations

import logging

from celery import Task, shared_task
from celery.exceptions import Reject
from django.conf import settings

from deliveries.counts import delivery_counts_fold
from deliveries.pipeline.attempt import campaign_yield_due, deliveries_attempt, delivery_attempt
from deliveries.pipeline.enqueue import ROUTE_TASK, SEND_TASK, delivery_dead_letter, send_defer
from deliveries.pipeline.outcome import AttemptResult
from deliveries.pipeline.release import deferred_release
from deliveries.pipeline.retry import jittered, route_backoff
from deliveries.pipeline.routing import deliveries_fallback, notifications_route
from deliveries.pipeline.senders import channel_defer_seconds, channel_sender
from deliveries.pipeline.sweep import sweep_due_deliveries, sweep_unrouted_notifications
from deliveries.webhook_events import WEBHOOK_POST_TASK
from deliveries.webhooks.posting import webhook_events_post, webhook_events_sweep
from notify.broker import delivered_queue
from notify.counts import accepted_counts_fold

logger = logging.getLogger(__name__)


# max_retries=None: the limit is NOTIFY_ROUTE_MAX_RETRIES, checked in the task itself.
@shared_task(name=ROUTE_TASK, bind=True, max_retries=None)
def route(self: Task, notification_id: str | list[str]) -> int:
    """Gate the notifications (one id, or a batch of them), create their deliveries, and
    start sending them.

    Routing a batch is one transaction, so a route that raises (the database away, a
    bug) left nothing behind: it is retried with a jittered, growing countdown, and after
    NOTIFY_ROUTE_MAX_RETRIES its message is dead-lettered for an operator.
    """
    ids = notification_id if isinstance(notification_id, list) else [notification_id]
    try:
        return len(notifications_route(notification_ids=ids))
    except Exception as error:
        retries = self.request.retries
        if retries >= settings.NOTIFY_ROUTE_MAX_RETRIES:
            logger.exception("notifications %s: routing failed %s times", ids, retries + 1)
            why = f"notifications {ids}: routing failed"
            raise Reject(why, requeue=False) from error
        countdown = jittered(route_backoff(retries + 1), jitter=settings.NOTIFY_RETRY_JITTER)
        logger.warning("notifications %s: routing raised %r; retry in %.1f s", ids, error,
                       countdown)  # fmt: skip
        raise self.retry(exc=error, countdown=countdown) from error


@shared_task(name=SEND_TASK, bind=True)
def send(
    self: Task, delivery_id: int | list[int], dead_letter: bool = False, channel: str | None = None
) -> list[str]:
    """One attempt at each delivery (one id, or a channel's batch of them).

    A delivery that ends dead is dead-lettered: a batch of one by rejecting this message,
    a member of a larger batch by a message of its own (`dead_letter`), which is rejected
    on arrival, so every dead delivery has its own dead letter to see and re-drive.

    The send holds one of its channel's senders in this worker (`channel_sender`); with
    none free, its message comes back later and the thread goes to other work at once.
    """
    if dead_letter:
        raise Reject(f"delivery {delivery_id}: retries exhausted", requeue=False)
    queue = delivered_queue(self.request.delivery_info)
    with channel_sender(channel=channel, queue=queue) as free:
        if not free and channel and queue:  # (a message without its channel is never refused)
            countdown = channel_defer_seconds(channel=channel)
            send_defer(delivery_id=delivery_id, channel=channel, queue=queue,
                       countdown=countdown)  # fmt: skip
            return ["deferred"]
        return _send(delivery_id, low=queue == "low")


def _send(delivery_id: int | list[int], *, low: bool) -> list[str]:
    """The attempts of a send message, and the dead letters of members that ended dead."""
    if isinstance(delivery_id, list):
        between = campaign_yield_due() if low and len(delivery_id) > 1 else None
        reports = deliveries_attempt(delivery_ids=delivery_id, between=between)
    else:  # a delivery that does not exist raises: its message is dead-lettered
        reports = [delivery_attempt(delivery_id=delivery_id)]
    deliveries_fallback(reports=reports)
    dead = [report for report in reports if report.result is AttemptResult.DEAD]
    if dead and not isinstance(delivery_id, list):
        # acks_late + acks_on_failure_or_timeout=False: RabbitMQ routes this message to
        # the dead-letter exchange, where an operator can see and re-drive it.
        raise Reject(f"delivery {delivery_id}: retries exhausted", requeue=False)
    for report in dead:
        delivery_dead_letter(delivery_id=report.delivery_id, queue=report.queue)
    return [report.result.value for report in reports]


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


@shared_task(name=WEBHOOK_POST_TASK)
def webhooks_post(event_ids: list[int]) -> list[str]:
    """Post one endpoint's status webhook events (published on `low`)."""
    return webhook_events_post(event_ids=event_ids)


@shared_task(name="deliveries.webhooks_sweep")
def webhooks_sweep() -> int:
    """Beat: re-queue status webhook events whose retry is due."""
    return webhook_events_sweep()
