"""RabbitMQ topology and live numbers, read from the broker itself, and what every task
publish goes through (`broker_countdown`, `NotifyTask`).

The Celery application itself is the project's (config/celery.py): this module reaches it
as Celery's current app, which that module makes the default of every thread.
"""

from __future__ import annotations

import functools
import logging
import math

from celery import Task
from celery import current_app as celery_app
from celery.worker.consumer import Consumer
from celery.worker.consumer.delayed_delivery import DelayedDelivery
from django.conf import settings
from kombu import Connection
from kombu.transport.native_delayed_delivery import (
    bind_queue_to_native_delayed_delivery_exchange,
    declare_native_delayed_delivery_exchanges_and_queues,
)
from kombu.utils.url import maybe_sanitize_url

logger = logging.getLogger(__name__)


def broker_countdown(countdown: float | None) -> float | None:
    """The countdown to publish for `countdown` seconds.

    With quorum queues Celery delays messages in the broker (native delayed delivery),
    in whole seconds: it truncates (1.9 s would come at 1 s, before it is due) and
    refuses anything under 1 s with a ValueError at publish time — inside a task's
    `retry` that ValueError turns the retry into a dead letter. So a positive countdown
    is rounded up to whole seconds there. Classic queues keep it as it is.
    """
    if not settings.NOTIFY_QUORUM_QUEUES or countdown is None or countdown <= 0:
        return countdown
    return float(math.ceil(countdown))


def delivered_queue(delivery_info: dict | None) -> str | None:
    """The queue class (`high`, `medium`, `low`) a task's message was routed to.

    The routing key is the queue's name, except after a broker delay (quorum queues):
    native delayed delivery prefixes it with the delay's bits ("0.1.….1.low"), and the
    message reaches its queue by a "#.low" binding. The last word is the queue either way.
    """
    routing_key = (delivery_info or {}).get("routing_key")
    return routing_key.rsplit(".", 1)[-1] if routing_key else None


class NotifyTask(Task):
    """Every task of the app: countdowns (a task's own `retry` included, which publishes
    through here) are made fit for the broker's delayed delivery (`broker_countdown`)."""

    def apply_async(
        self,
        args=None,
        kwargs=None,
        task_id=None,
        producer=None,
        link=None,
        link_error=None,
        shadow=None,
        **options,
    ):
        if "countdown" in options:
            options["countdown"] = broker_countdown(options["countdown"])
        return super().apply_async(
            args, kwargs, task_id, producer, link, link_error, shadow, **options
        )


def declare_topology(connection: Connection | None = None) -> None:
    """Declare every exchange, queue and binding in settings (idempotent).

    Run by each worker at start, so the dead-letter exchange and queue exist before the
    first message is dead-lettered, even on a broker that has never seen us. With
    quorum queues, also the exchanges and queues of native delayed delivery.
    """
    with connection or celery_app.connection_for_write() as conn:
        channel = conn.default_channel
        for queue in celery_app.conf.task_queues:
            queue.bind(channel).declare()
        if settings.NOTIFY_QUORUM_QUEUES:
            declare_delayed_delivery(conn)


def declare_delayed_delivery(connection: Connection) -> None:
    """Declare native delayed delivery's exchanges and queues, and bind the work queues
    to its delivery exchange, through `connection` (idempotent).

    Only the work queues: nothing is published to `dead_letter` with a countdown, and
    its exchange is a direct one, which delayed delivery cannot forward to.
    """
    declare_native_delayed_delivery_exchanges_and_queues(
        connection, celery_app.conf.broker_native_delayed_delivery_queue_type
    )
    for queue in celery_app.conf.task_queues:
        if queue.name in settings.NOTIFY_QUEUE_NAMES:
            bind_queue_to_native_delayed_delivery_exchange(connection, queue)


class DelayedDeliveryOnLiveNode(DelayedDelivery):
    """Celery's native-delayed-delivery start-up step, through the node the worker is
    connected to.

    Celery's own step declares the delay topology once per URL of the broker list and
    retries an unreachable one for about fifteen seconds before it gives up — each time
    the consumer (re)connects, and before the worker takes messages again. With a node
    down that stall would follow every failover. A cluster shares its topology, so the
    live node is enough; if that fails the worker goes on (a countdown published before
    the topology exists is what the retry sweeper recovers) and logs why.
    """

    def start(self, c: Consumer) -> None:
        url = c.connection.as_uri(include_password=True)
        try:
            with c.app.connection_for_write(url=url) as connection:
                declare_delayed_delivery(connection)
        except Exception as error:  # the node went away meanwhile: the next start retries
            logger.warning(
                "delayed delivery: could not declare its topology on %s: %s",
                maybe_sanitize_url(url),
                error,
            )


class WorkerConsumer(Consumer):
    """Celery's consumer (settings: CELERY_WORKER_CONSUMER), with two changes for a
    broker cluster:

    - `DelayedDeliveryOnLiveNode` in place of Celery's own step (included, as Celery's
      is, only when a queue is a quorum queue);
    - its reconnection back-off capped at NOTIFY_BROKER_RECONNECT_MAX. Celery waits
      2 s more after each round of the node list, up to 30 s, so after a long outage
      of every node a worker could idle half a minute with the cluster back. (Within a
      round it tries the next node at once: a single lost node costs no wait.)
    """

    class Blueprint(Consumer.Blueprint):
        default_steps = [
            "notify.broker:DelayedDeliveryOnLiveNode"
            if step == "celery.worker.consumer.delayed_delivery:DelayedDelivery"
            else step
            for step in Consumer.Blueprint.default_steps
        ]

    def ensure_connected(self, conn: Connection) -> Connection:
        conn.ensure_connection = functools.partial(
            conn.ensure_connection,
            interval_start=settings.NOTIFY_BROKER_RECONNECT_MAX / 4,
            interval_step=settings.NOTIFY_BROKER_RECONNECT_MAX / 4,
            interval_max=settings.NOTIFY_BROKER_RECONNECT_MAX,
        )
        return super().ensure_connected(conn)


def queue_depth(name: str, connection: Connection | None = None) -> int:
    """Messages ready in queue `name`, live (a passive declare, not the lagging CLI)."""
    with connection or celery_app.connection_for_read() as conn:
        _, count, _ = conn.default_channel.queue_declare(queue=name, passive=True)
        return count


def publish_task(
    name: str,
    *,
    args: list,
    queue: str,
    priority: int,
    countdown: float | None = None,
    kwargs: dict | None = None,
) -> None:
    """Publish a task through our exchange to the queue of its class (confirmed).

    The exchange is named explicitly: with only a queue, Celery would publish to the
    default exchange, and bindings on `notify` (taps, mirrors) would never see it. The
    broker's confirm is waited for at most NOTIFY_BROKER_CONFIRM_TIMEOUT: a broker that
    went away mid-publish raises instead of hanging the caller, which keeps what it
    published for another try (the relay's row stays unpublished).
    """
    celery_app.send_task(
        name,
        args=args,
        kwargs=kwargs,
        queue=queue,
        exchange=settings.NOTIFY_EXCHANGE.name,
        routing_key=queue,
        countdown=broker_countdown(countdown),
        priority=priority,
        confirm_timeout=settings.NOTIFY_BROKER_CONFIRM_TIMEOUT,
    )


def batch_size_for(queue: str) -> int:
    """How many ids one route or send message carries at most on this queue class: a
    campaign's (`low`) full batches, the transactional classes' smaller ones."""
    if queue == "low":
        return settings.NOTIFY_BATCH_SIZE
    return settings.NOTIFY_BATCH_SIZE_TRANSACTIONAL


def chunked(items: list, size: int) -> list[list]:
    """`items` in consecutive lists of at most `size`."""
    return [items[start : start + size] for start in range(0, len(items), size)]
