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
        countdown=countdown,
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
