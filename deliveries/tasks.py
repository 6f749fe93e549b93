"""Celery tasks for deliveries: thin wrappers that pass ids to services."""

from __future__ import annotations

import functools
import logging
import time

from celery import Task, shared_task
from celery.exceptions import Reject
from django.conf import settings

from deliveries.counts import delivery_counts_fold
from deliveries.pipeline.attempt import campaign_yield_due, deliveries_attempt, delivery_attempt
from deliveries.pipeline.digest_close import digest_windows_due_left, digests_close
from deliveries.pipeline.digests import CLOSE_TASK
from deliveries.pipeline.enqueue import (
    ROUTE_TASK,
    SEND_TASK,
    deliveries_enqueue,
    delivery_dead_letter,
    send_defer,
)
from deliveries.pipeline.outcome import AttemptReport, AttemptResult
from deliveries.pipeline.provider_events import early_provider_events_sweep
from deliveries.pipeline.release import deferred_release
from deliveries.pipeline.retry import jittered, route_backoff
from deliveries.pipeline.routing import (
    Routed,
    deliveries_fallback,
    notifications_route,
    notifications_route_here,
)
from deliveries.pipeline.sweep import sweep_due_deliveries, sweep_unrouted_notifications
from flow.senders import (
    channel_sender_serve,
    channel_sender_take,
    channel_sender_turn,
)
from notify.broker import delivered_queue, publish_task
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
    queue = delivered_queue(self.request.delivery_info)
    try:
        if queue in settings.NOTIFY_SEND_AT_ROUTE_QUEUES:
            routed = notifications_route_here(notification_ids=ids, queue=queue)
        else:
            routed = Routed(notifications_route(notification_ids=ids), {})
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
    for channel, batch in routed.here.items():
        _send_here(batch, channel=channel, queue=queue)
    return len(routed.started)


def _send_here(delivery_ids: list[int], *, channel: str, queue: str) -> None:
    """Send what this thread just routed, at once, if its channel has a free sender here;
    else (or if sending raised before it could record anything) publish it as routing
    would have. A second message for a delivery already claimed is dropped by the claim."""
    if not channel_sender_take(channel=channel, queue=queue, work=delivery_ids):
        deliveries_enqueue(started=[(pk, channel, queue) for pk in delivery_ids], push_owners={})
        return
    started = time.monotonic()
    try:
        _send(delivery_ids, low=False)
    except Exception:
        logger.exception(
            "deliveries %s: sending where they were routed raised; published", delivery_ids
        )
        deliveries_enqueue(started=[(pk, channel, queue) for pk in delivery_ids], push_owners={})
    finally:
        _line_serve(channel=channel, queue=queue, started=started)


@shared_task(name=SEND_TASK, bind=True)
def send(
    self: Task, delivery_id: int | list[int], dead_letter: bool = False, channel: str | None = None
) -> list[str]:
    """One attempt at each delivery (one id, or a channel's batch of them).

    A delivery that ends dead is dead-lettered: a batch of one by rejecting this message,
    a member of a larger batch by a message of its own (`dead_letter`), which is rejected
    on arrival, so every dead delivery has its own dead letter to see and re-drive.

    The send takes one of its channel's senders in this worker
    (flow/senders.py); with none free it waits in its channel's line in
    this process, where the next sender of the channel runs it, and the thread goes to
    other work at once; when the line is full, its message comes back later.
    """
    if dead_letter:
        raise Reject(f"delivery {delivery_id}: retries exhausted", requeue=False)
    queue = delivered_queue(self.request.delivery_info)
    low = queue == "low"
    if not channel or not queue:  # published before send messages named their channel
        return _send(delivery_id, low=low)
    turn = channel_sender_turn(channel=channel, queue=queue, work=delivery_id)
    if turn.waiting:
        return ["waiting"]
    if not turn.taken:
        # At INFO: a deferral is the channel's line overflowing, rare unless a burst or a
        # slow provider outruns the senders; its countdown tells how far behind it is.
        logger.info("%s sender: send %s deferred, countdown %s", channel, delivery_id,
                    turn.defer)  # fmt: skip
        send_defer(delivery_id=delivery_id, channel=channel, queue=queue,
                   countdown=turn.defer)  # fmt: skip
        return ["deferred"]
    started = time.monotonic()
    try:
        return _send(delivery_id, low=low)
    finally:
        _line_serve(channel=channel, queue=queue, started=started)


def _line_serve(*, channel: str, queue: str, started: float) -> None:
    """This thread's send (begun at `started`) is done: serve its channel's line, then
    give the slot back."""
    channel_sender_serve(
        channel=channel,
        queue=queue,
        started=started,
        run=functools.partial(_send_waiting, queue=queue),
        hand_back=lambda waited: send_defer(
            delivery_id=waited, channel=channel, queue=queue, countdown=None
        ),
    )


def _send(delivery_id: int | list[int], *, low: bool) -> list[str]:
    """The attempts of a send message, and the dead letters of members that ended dead."""
    reports = _attempts(delivery_id, low=low)
    dead = [report for report in reports if report.result is AttemptResult.DEAD]
    if dead and not isinstance(delivery_id, list):
        # acks_late + acks_on_failure_or_timeout=False: RabbitMQ routes this message to
        # the dead-letter exchange, where an operator can see and re-drive it.
        raise Reject(f"delivery {delivery_id}: retries exhausted", requeue=False)
    for report in dead:
        delivery_dead_letter(delivery_id=report.delivery_id, queue=report.queue)
    return [report.result.value for report in reports]


def _send_waiting(delivery_id: int | list[int], *, queue: str) -> None:
    """A send that waited in this worker for its channel's sender, run by the sender
    that took it from the line. Its own message was acknowledged when it began to wait,
    so each delivery that ends dead gets a dead letter of its own, as a batch member's."""
    for report in _attempts(delivery_id, low=queue == "low"):
        if report.result is AttemptResult.DEAD:
            delivery_dead_letter(delivery_id=report.delivery_id, queue=report.queue)


def _attempts(delivery_id: int | list[int], *, low: bool) -> list[AttemptReport]:
    """One attempt at each delivery of a send, and the fallbacks of those that died."""
    if isinstance(delivery_id, list):
        between = campaign_yield_due() if low and len(delivery_id) > 1 else None
        reports = deliveries_attempt(delivery_ids=delivery_id, between=between)
    else:  # a delivery that does not exist raises: its message is dead-lettered
        reports = [delivery_attempt(delivery_id=delivery_id)]
    deliveries_fallback(reports=reports)
    return reports


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


@shared_task(name=CLOSE_TASK)
def close_digests() -> int:
    """Beat, and a countdown from each window that opens: close the digest windows that
    are due (each becomes one delivery through the gate). Safe to run twice at once."""
    closed = 0
    while True:
        batch = digests_close()
        closed += batch
        if batch < settings.NOTIFY_DIGEST_CLOSE_BATCH:
            break
    if digest_windows_due_left():
        # A route held one of them (it was filing an event in it): look again shortly
        # rather than wait for beat's next run.
        publish_task(CLOSE_TASK, args=[], queue="low", countdown=settings.NOTIFY_DIGEST_RECHECK,
                     priority=settings.NOTIFY_PRIORITY_RETRY)  # fmt: skip
    return closed


@shared_task(name="deliveries.metrics_counts_fold")
def metrics_counts_fold() -> dict[str, int]:
    """Beat: fold what changed since the last run into the /metrics rollups."""
    return {"accepted": accepted_counts_fold(), "deliveries": delivery_counts_fold()}


@shared_task(name="deliveries.provider_events_sweep")
def provider_events_sweep() -> int:
    """Beat: apply provider events that came before their send's record."""
    return early_provider_events_sweep()
