"""Dead letters: every message RabbitMQ dead-letters becomes a row an operator can see
and re-drive, and the `dead_letter` queue itself stays empty.

A consumer process (`manage.py dead_letter_consumer`) drains the queue: each message is
written to its row (one per failing route or send, else per task id: a message that dies
again updates it, see `letter_identity`) and acked only
after the row is committed, so a crash in between re-delivers it and costs a count, never
the message. A re-drive publishes the stored message again as it was first published,
to the exchange and routing key it died from.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Any

from celery import current_app as celery_app
from django.conf import settings
from django.db import close_old_connections, transaction
from django.utils import timezone
from kombu import Connection, Exchange, Queue
from kombu.message import Message

from deliveries.models import DeadLetter
from deliveries.pipeline.enqueue import ROUTE_TASK, SEND_TASK
from deliveries.pipeline.redrive import deliveries_redrive, send_letters_close
from notify.broker import declare_topology

logger = logging.getLogger(__name__)

DEAD_LETTER_QUEUE = "dead_letter"
# Headers RabbitMQ adds when it dead-letters a message; a re-drive publishes without them.
_DEATH_HEADERS = ("x-death", "x-first-death-exchange", "x-first-death-queue",
                  "x-first-death-reason", "x-last-death-exchange", "x-last-death-queue",
                  "x-last-death-reason")  # fmt: skip


def dead_letters_drain(*, connection: Connection, limit: int | None = None) -> int:
    """Move what is in `dead_letter` now into the table (at most `limit`); returns how
    many messages were recorded. Each is acked after its row is committed."""
    queue = Queue(DEAD_LETTER_QUEUE, no_declare=True)(connection.default_channel)
    moved = 0
    while limit is None or moved < limit:
        message = queue.get(no_ack=False)
        if message is None:
            break
        try:
            dead_letter_record(message=message)
        except Exception:
            message.requeue()  # kept in the queue for the next round
            raise
        message.ack()
        moved += 1
    return moved


def dead_letter_record(*, message: Message, now: datetime | None = None) -> DeadLetter:
    """Write one dead-lettered message to its row: created the first time, counted and
    opened again when the same message (task id) comes back after a re-drive."""
    now = now or timezone.now()
    headers = _jsonable(dict(message.headers or {}))
    deaths = headers.get("x-death") or [{}]
    death = deaths[0]  # RabbitMQ puts the most recent death first
    body = message.body if isinstance(message.body, bytes) else str(message.body).encode()
    task, arguments = str(headers.get("task") or ""), _arguments(message)
    message_id = letter_identity(task=task, arguments=arguments, headers=headers, body=body)
    fields = {
        "task": task,
        "arguments": arguments,
        "reason": str(death.get("reason") or headers.get("x-last-death-reason") or "unknown"),
        "queue": str(death.get("queue") or ""),
        "exchange": str(death.get("exchange") or ""),
        "routing_key": str((death.get("routing-keys") or [death.get("queue") or ""])[0]),
        "death_headers": headers.get("x-death") or [],
        "headers": {k: v for k, v in headers.items() if k not in _DEATH_HEADERS},
        "body": body.decode("utf-8", errors="replace"),
        "content_type": message.content_type or "application/json",
        "content_encoding": message.content_encoding or "utf-8",
        "priority": (message.properties or {}).get("priority"),
        "last_seen_at": now,
    }
    with transaction.atomic():
        row = DeadLetter.objects.select_for_update().filter(message_id=message_id).first()
        if row is None:
            return DeadLetter.objects.create(message_id=message_id, first_seen_at=now, **fields)
        for name, value in fields.items():
            setattr(row, name, value)
        row.count += 1
        row.redriven_at = None  # it died again: open once more
        row.redriven_by = None
        row.save()
    logger.warning("dead letter %s (%s) came back: %s times now", message_id, row.task, row.count)
    return row


def letter_identity(*, task: str, arguments: dict, headers: dict, body: bytes) -> str:
    """Which row a dead message belongs to: one row per thing that failed.

    A route or send message dies for its notification or delivery; the sweeper's
    republish of an unrouted notification, or a re-driven delivery's fresh send, is a new
    message (a new task id) for the same failure, so those are keyed by task and id and
    come back to their row (counted, opened again). Any other message is its task id.
    """
    args = arguments.get("args") or []
    if task in (ROUTE_TASK, SEND_TASK) and args and isinstance(args[0], str | int):
        return f"{task}:{args[0]}"
    return str(headers.get("id") or hashlib.sha256(body).hexdigest())


def dead_letters_redrive(*, dead_letter_ids: Iterable[int], by) -> int:
    """Run open dead letters again; mark them re-driven by `by`, now.

    A send message is re-driven as its delivery (a fresh attempt budget, recorded): the
    message alone would find its delivery `dead` and the claim would refuse it. Any other
    message is published again as it was, inside the transaction, not after commit: the
    row holds the only copy of the message, so a publish that fails must leave it open
    (the transaction rolls back). A commit failing after the publish at worst lets the
    task run twice, which every task tolerates. Returns how many were re-driven.
    """
    now = timezone.now()
    with transaction.atomic():
        rows = list(
            DeadLetter.objects.select_for_update().filter(
                pk__in=list(dead_letter_ids), redriven_at__isnull=True
            )
        )
        if not rows:
            return 0
        sends = {row.pk: _send_delivery_id(row) for row in rows if row.task == SEND_TASK}
        delivery_ids = [delivery_id for delivery_id in sends.values() if delivery_id is not None]
        deliveries_redrive(delivery_ids=delivery_ids, by=by)
        # Closes them even where the delivery was no longer dead (delivered since, say).
        send_letters_close(delivery_ids=delivery_ids, by=by, now=now)
        republish = [row for row in rows if sends.get(row.pk) is None]
        if republish:
            _republish(republish)
            DeadLetter.objects.filter(pk__in=[row.pk for row in republish]).update(
                redriven_at=now, redriven_by=by
            )
    return len(rows)


def _republish(rows: list[DeadLetter]) -> None:
    """Publish the stored messages as they were first published, where they died from."""
    with celery_app.connection_for_write() as connection:
        producer = connection.Producer()
        for row in rows:
            producer.publish(
                row.body.encode("utf-8"),
                exchange=Exchange(row.exchange) if row.exchange else "",
                routing_key=row.routing_key,
                headers=row.headers,
                content_type=row.content_type,
                content_encoding=row.content_encoding,
                priority=row.priority,
                delivery_mode=2,
                correlation_id=row.headers.get("id") if row.task else None,
                retry=True,
            )


def _send_delivery_id(row: DeadLetter) -> int | None:
    """The delivery a dead `deliveries.send` message was for, if its arguments say."""
    args = (row.arguments or {}).get("args") or []
    return args[0] if args and isinstance(args[0], int) else None


def dead_letters_consume_forever(*, should_stop: Callable[[], bool]) -> None:
    """The consumer process: drain `dead_letter` into the table, then look again every
    NOTIFY_DEAD_LETTER_POLL_INTERVAL; a broker or database that is away is waited for."""
    while not should_stop():
        try:
            with celery_app.connection_for_read() as connection:
                declare_topology(connection)  # a fresh broker: the queue exists at once
                while not should_stop():
                    close_old_connections()
                    if not dead_letters_drain(connection=connection):
                        time.sleep(settings.NOTIFY_DEAD_LETTER_POLL_INTERVAL)
        except Exception:  # the broker or the database is away: back off, then again
            logger.exception("dead-letter consumer: round failed")
            time.sleep(settings.NOTIFY_DEAD_LETTER_POLL_INTERVAL)


def _arguments(message: Message) -> dict[str, Any]:
    """A Celery message's args and kwargs (protocol 2 body: [args, kwargs, embed])."""
    try:
        decoded = json.loads(message.body)
    except (TypeError, ValueError):
        return {}
    if isinstance(decoded, list) and len(decoded) >= 2:
        return {"args": _jsonable(decoded[0]), "kwargs": _jsonable(decoded[1])}
    if isinstance(decoded, dict):  # protocol 1
        return {"args": decoded.get("args", []), "kwargs": decoded.get("kwargs", {})}
    return {}


def _jsonable(value: Any) -> Any:
    """AMQP header values as JSON: timestamps as ISO strings, bytes as text."""
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    return value
