"""A send batch's rounds: the next batch through the same channels starts at the size the
last one ended at, so a stream of campaign batches does not pay a claim, a record and a
commit for each of its first few members again and again; a slow provider still shrinks
it, and a lone send does not undo it. Real SMTP peer, real PostgreSQL."""

from __future__ import annotations

import uuid

from django.db import connection

from deliveries.models import Delivery
from deliveries.pipeline.attempt import deliveries_attempt, round_size_start
from deliveries.pipeline.routing import notifications_route
from notify.models import Category, Producer, Recipient
from notify.services import notification_accept
from tests.deliveries.pipeline.test_costs import ORDER, StatementLog

EMAIL = frozenset({"email"})


def queued_emails(people: int, prefix: str) -> list[int]:
    """One order.shipped email each to `people` new recipients, routed: the email
    deliveries' ids, queued for their sender, in the order they were accepted."""
    producer = Producer.objects.get_or_create(name="rounds")[0]
    category = Category.objects.get(key="order.shipped")
    ids = []
    for number in range(people):
        user_id = f"{prefix}-{number}"
        Recipient.objects.create(user_id=user_id, email=f"{user_id}@example.com", locale="en")
        ids.append(
            notification_accept(
                producer=producer,
                event_id=str(uuid.uuid4()),
                user_id=user_id,
                category=category,
                payload=ORDER,
                channels=["email"],
                ttl_seconds=None,
            ).notification_id
        )
    notifications_route(notification_ids=ids)
    return list(
        Delivery.objects.filter(notification_id__in=ids, channel="email", status="queued")
        .order_by("pk")
        .values_list("pk", flat=True)
    )


def claims(batch: list[int]) -> int:
    """Send the batch; how many claim statements (one per round) it took."""
    log = StatementLog()
    with connection.execute_wrapper(log):
        deliveries_attempt(delivery_ids=batch)
    return sum("SET status = 'sending'" in sql for sql in log.statements)


def real_smtp(settings, smtp) -> None:
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST, settings.EMAIL_PORT = "127.0.0.1", smtp.port


def test_the_next_batch_starts_where_the_last_one_ended(demo_data, smtp, settings):
    real_smtp(settings, smtp)
    settings.NOTIFY_BATCH_ROUND_START = 2
    settings.NOTIFY_BATCH_ROUND_SECONDS = 60.0  # every round is fast: each one doubles
    first, second = queued_emails(20, "r-a"), queued_emails(20, "r-b")

    assert claims(first) == 4  # 2, 4, 8, then the 6 left
    # The round of 8 ran full and fast: the next batch starts at 16 (the short last
    # round says nothing more).
    assert round_size_start(EMAIL) == 16
    assert claims(second) == 2  # 16, then the 4 left
    assert len(smtp.received) == 40
    assert set(Delivery.objects.filter(channel="email").values_list("status", flat=True)) == {
        "delivered"
    }


def test_a_slow_round_shrinks_where_the_next_batch_starts(demo_data, smtp, settings):
    real_smtp(settings, smtp)
    settings.NOTIFY_BATCH_ROUND_START = 8
    settings.NOTIFY_BATCH_ROUND_SECONDS = 60.0
    assert claims(queued_emails(16, "r-c")) == 2
    assert round_size_start(EMAIL) == 16

    # Every round now takes far longer than a round should: the size is cut in
    # proportion, to one member here, and the next batch starts there.
    settings.NOTIFY_BATCH_ROUND_SECONDS = 0.000001
    assert claims(queued_emails(3, "r-d")) == 1  # 16 planned: all 3 in one round
    assert round_size_start(EMAIL) == 1
    assert claims(queued_emails(3, "r-e")) == 3  # one member a round
    assert len(smtp.received) == 22


def test_a_lone_send_leaves_where_the_next_batch_starts(demo_data, smtp, settings):
    real_smtp(settings, smtp)
    settings.NOTIFY_BATCH_ROUND_START = 4
    settings.NOTIFY_BATCH_ROUND_SECONDS = 60.0
    assert claims(queued_emails(12, "r-f")) == 2  # 4, 8
    assert round_size_start(EMAIL) == 16

    assert claims(queued_emails(1, "r-g")) == 1  # a retry, a login code: one member
    assert round_size_start(EMAIL) == 16
    assert claims(queued_emails(16, "r-h")) == 1
    assert len(smtp.received) == 29
