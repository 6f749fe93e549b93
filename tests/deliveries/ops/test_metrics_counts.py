"""/metrics counts come from rollups that beat folds: exact before and after a fold, each
move of a delivery counted once, and nothing lost when rows are deleted (erasure,
retention) — a counter never goes down."""

from __future__ import annotations

import itertools
import threading

import pytest
from django.db import connection, transaction

from campaigns.erasure import person_erase
from deliveries.counts import delivery_counts_fold
from deliveries.models import Delivery, DeliveryStatus
from deliveries.tasks import metrics_counts_fold
from notify.counts import accepted_counts_fold
from notify.models import Category, ErasureVia, Notification, Producer, Recipient

_events = itertools.count()


@pytest.fixture
def people(db):
    """Two recipients, a producer and a `high` category of their own."""
    category = Category.objects.create(key="metrics.codes", queue="high")
    return {
        "producer": Producer.objects.create(name="metrics-tests"),
        "category": category,
        "ann": Recipient.objects.create(user_id="metrics-ann", email="ann@example.org"),
        "bob": Recipient.objects.create(user_id="metrics-bob", email="bob@example.org"),
    }


def accept(people, recipient: str = "ann") -> Notification:
    return Notification.objects.create(
        producer=people["producer"],
        event_id=f"metrics-{next(_events)}",
        recipient=people[recipient],
        category=people["category"],
        payload={},
        fingerprint="x",
    )


def deliver(notification: Notification, status: str, attempts: int, channel: str = "email"):
    return Delivery.objects.create(
        notification=notification,
        channel=channel,
        target=f"t{next(_events)}",
        queue="high",
        status=status,
        attempts=attempts,
    )


def move(delivery: Delivery, status: str, attempts: int) -> None:
    """What the sender does: one conditional UPDATE of the row, nothing else."""
    Delivery.objects.filter(pk=delivery.pk).update(status=status, attempts=attempts)


def accepted(metrics) -> float | None:
    return metrics.value(
        "notify_notifications_accepted_total", category="metrics.codes", queue="high"
    )


def test_counts_are_the_same_before_and_after_a_fold(people, scrape):
    for _ in range(3):
        deliver(accept(people), DeliveryStatus.QUEUED, 0)
    deliver(accept(people, "bob"), DeliveryStatus.DELIVERED, 1, channel="inapp")

    before = scrape()  # nothing folded yet: all of it is read from the pending rows
    assert accepted(before) == 4
    assert before.value("notify_deliveries", channel="email", status="queued") == 3
    assert before.value("notify_deliveries", channel="inapp", status="delivered") == 1

    assert metrics_counts_fold() == {"accepted": 4, "deliveries": 4}
    after = scrape()
    assert accepted(after) == 4
    assert after.value("notify_deliveries", channel="email", status="queued") == 3
    assert after.value("notify_deliveries", channel="inapp", status="delivered") == 1
    assert metrics_counts_fold() == {"accepted": 0, "deliveries": 0}  # nothing changed


def test_a_delivery_moving_through_statuses_is_counted_once_where_it_is_now(people, scrape):
    delivery = deliver(accept(people), DeliveryStatus.QUEUED, 0)
    delivery_counts_fold()
    move(delivery, DeliveryStatus.SENDING, 0)
    move(delivery, DeliveryStatus.RETRYING, 1)  # two moves between folds

    metrics = scrape()
    assert metrics.value("notify_deliveries", channel="email", status="queued") == 0
    assert metrics.value("notify_deliveries", channel="email", status="sending") == 0
    assert metrics.value("notify_deliveries", channel="email", status="retrying") == 1

    delivery_counts_fold()
    move(delivery, DeliveryStatus.SENDING, 1)
    delivery_counts_fold()
    move(delivery, DeliveryStatus.DELIVERED, 2)
    for fold in (False, True):
        if fold:
            assert delivery_counts_fold() == 1
        metrics = scrape()
        for status in DeliveryStatus.values:
            expected = 1 if status == "delivered" else 0
            assert metrics.value("notify_deliveries", channel="email", status=status) == expected
        # Delivered on the second try: not a first-attempt success.
        assert metrics.value("notify_first_attempt_success_ratio", channel="email") == 0.0


def test_first_attempt_ratio_and_dead_count_come_from_the_same_numbers(people, scrape):
    for status, attempts in [
        (DeliveryStatus.DELIVERED, 1),
        (DeliveryStatus.DELIVERED, 1),
        (DeliveryStatus.DELIVERED, 3),
        (DeliveryStatus.DEAD, 6),
        (DeliveryStatus.EXPIRED, 0),  # never tried: not in the ratio
        (DeliveryStatus.SUPPRESSED, 0),
    ]:
        deliver(accept(people), status, attempts)
    delivery_counts_fold(batch=2)  # in batches, as beat does with a backlog

    metrics = scrape()
    assert metrics.value("notify_first_attempt_success_ratio", channel="email") == 2 / 4
    assert metrics.value("notify_dead_deliveries") == 1
    assert metrics.value("notify_deliveries", channel="email", status="expired") == 1


def test_a_fold_stops_at_its_limit_and_the_scrape_stays_exact(people, scrape):
    for _ in range(5):
        deliver(accept(people), DeliveryStatus.DELIVERED, 1)
    assert accepted_counts_fold(limit=2, batch=1) == 2
    assert delivery_counts_fold(limit=3, batch=2) == 3

    metrics = scrape()
    assert accepted(metrics) == 5
    assert metrics.value("notify_deliveries", channel="email", status="delivered") == 5
    assert metrics_counts_fold() == {"accepted": 3, "deliveries": 2}  # the next run goes on


def test_counts_stay_when_the_rows_are_deleted_as_retention_drops_a_month(people, scrape):
    for _ in range(3):
        deliver(accept(people), DeliveryStatus.DELIVERED, 1)
    metrics_counts_fold()
    with connection.cursor() as cursor:  # what dropping the month's partitions does
        cursor.execute(f"DELETE FROM {Delivery._meta.db_table}")
        cursor.execute(f"DELETE FROM {Notification._meta.db_table}")

    metrics = scrape()
    assert accepted(metrics) == 3
    assert metrics.value("notify_deliveries", channel="email", status="delivered") == 3
    assert metrics.value("notify_first_attempt_success_ratio", channel="email") == 1.0


def test_erasure_keeps_what_was_sent_and_forgets_what_never_will_be(people, scrape):
    sent = deliver(accept(people), DeliveryStatus.QUEUED, 0)
    deliver(accept(people), DeliveryStatus.DEFERRED, 0)  # waiting for quiet hours to end
    metrics_counts_fold()
    move(sent, DeliveryStatus.DELIVERED, 1)  # not folded when the erasure comes
    accept(people)  # accepted a moment ago, not folded either
    deliver(accept(people, "bob"), DeliveryStatus.DEFERRED, 0)  # someone else's

    person_erase(user_id="metrics-ann", via=ErasureVia.API, requested_by="test")

    assert not Notification.objects.filter(recipient__user_id="metrics-ann").exists()
    for metrics in (scrape(), (metrics_counts_fold(), scrape())[1]):
        assert accepted(metrics) == 4  # all of ann's three, and bob's
        assert metrics.value("notify_deliveries", channel="email", status="delivered") == 1
        assert metrics.value("notify_deliveries", channel="email", status="queued") == 0
        assert metrics.value("notify_deliveries", channel="email", status="deferred") == 1


def test_the_fold_skips_a_delivery_a_sender_holds_and_takes_it_on_the_next_run(
    transactional_db, people, scrape
):
    held = deliver(accept(people), DeliveryStatus.DELIVERED, 1)
    deliver(accept(people), DeliveryStatus.DELIVERED, 1)
    locked, release = threading.Event(), threading.Event()

    def sender() -> None:  # the sender's claim holds the row for its send
        try:
            with transaction.atomic():
                Delivery.objects.select_for_update().get(pk=held.pk)
                locked.set()
                release.wait(timeout=10)
        finally:
            connection.close()

    thread = threading.Thread(target=sender)
    thread.start()
    try:
        assert locked.wait(timeout=10)
        assert delivery_counts_fold() == 1  # the free one, without waiting for the other
        metrics = scrape()
        assert metrics.value("notify_deliveries", channel="email", status="delivered") == 2
    finally:
        release.set()
        thread.join(timeout=10)
    assert delivery_counts_fold() == 1
    assert scrape().value("notify_deliveries", channel="email", status="delivered") == 2
