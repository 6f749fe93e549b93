"""RabbitMQ topology and live numbers, read from the broker itself."""

from __future__ import annotations

from django.conf import settings
from kombu import Connection

from notify.celery import app as celery_app


def declare_topology(connection: Connection | None = None) -> None:
    """Declare every exchange, queue and binding in settings (idempotent).

    Run by each worker at start, so the dead-letter exchange and queue exist before the
    first message is dead-lettered, even on a broker that has never seen us.
    """
    with connection or celery_app.connection_for_write() as conn:
        channel = conn.default_channel
        for queue in celery_app.conf.task_queues:
            queue.bind(channel).declare()


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
        queue=queue,
        exchange=settings.NOTIFY_EXCHANGE.name,
        routing_key=queue,
        countdown=countdown,
        priority=priority,
        confirm_timeout=settings.NOTIFY_BROKER_CONFIRM_TIMEOUT,
    )
