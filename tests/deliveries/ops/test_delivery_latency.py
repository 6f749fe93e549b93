"""The delivery latency histogram counts every delivery that succeeded: `delivered` (the
provider accepted it) and `reached` (the provider since reported it handed to the person:
an ESP's delivered event, an SMSC's DELIVRD receipt), read through its partial index."""

from __future__ import annotations

import itertools
import re
from datetime import timedelta

import pytest
from django.db import connection, transaction
from django.utils import timezone

from deliveries.channels.sms.smpp.receipts import Receipt, receipt_apply
from deliveries.models import Delivery, DeliveryStatus, ProviderEventKind
from deliveries.ops.selectors import latency_rows
from deliveries.pipeline.provider_events import Applied, ProviderNews, provider_event_apply
from notify.models import Category, Notification, Producer, Recipient

_events = itertools.count()


@pytest.fixture
def ann(db):
    category = Category.objects.create(key="latency.codes", queue="high")
    producer = Producer.objects.create(name="latency-tests")
    recipient = Recipient.objects.create(user_id="latency-ann", email="ann@example.org")
    return producer, category, recipient


def finished(
    ann, channel: str, status: str, *, seconds: float, ago: float = 60, message_id: str = ""
) -> Delivery:
    """A delivery accepted `ago` seconds before now, finished `seconds` later."""
    producer, category, recipient = ann
    notification = Notification.objects.create(
        producer=producer,
        event_id=f"latency-{next(_events)}",
        recipient=recipient,
        category=category,
        payload={},
        fingerprint="x",
    )
    accepted_at = timezone.now() - timedelta(seconds=ago)
    Notification.objects.filter(pk=notification.pk).update(created_at=accepted_at)
    notification.created_at = accepted_at
    return Delivery.objects.create(
        notification=notification,
        channel=channel,
        target=f"t{next(_events)}",
        queue="high",
        status=status,
        attempts=1,
        provider_message_id=message_id,
        finished_at=accepted_at + timedelta(seconds=seconds),
    )


def test_reached_email_and_sms_are_in_the_latency_histogram(ann, scrape):
    finished(ann, "email", DeliveryStatus.DELIVERED, seconds=2)
    email = finished(ann, "email", DeliveryStatus.DELIVERED, seconds=3, message_id="esp-1")
    sms = finished(ann, "sms", DeliveryStatus.DELIVERED, seconds=4, message_id="smsc-1 smsc-2")
    slow_sms = finished(
        ann, "sms", DeliveryStatus.DELIVERED, seconds=90, ago=120, message_id="smsc-3"
    )
    # Not successes, or finished before the window: not in it.
    finished(ann, "email", DeliveryStatus.FAILED, seconds=1)
    finished(ann, "sms", DeliveryStatus.DEAD, seconds=1)
    finished(ann, "sms", DeliveryStatus.REACHED, seconds=1, ago=2 * 86400)
    # The provider reports them handed to the person, as it does seconds after the send:
    # the ESP's delivered event, the SMSC's DELIVRD receipts (one per part is enough).
    news = ProviderNews(
        esp="postmark", key="evt-1", kind=ProviderEventKind.DELIVERED, message_id="esp-1"
    )
    assert provider_event_apply(news=news) == Applied.RECORDED
    assert receipt_apply(receipt=Receipt("smsc-2", "DELIVRD", "000", "stat:DELIVRD")) == 1
    assert receipt_apply(receipt=Receipt("smsc-3", "DELIVRD", "000", "stat:DELIVRD")) == 1
    for delivery in (email, sms, slow_sms):
        delivery.refresh_from_db()
        assert delivery.status == DeliveryStatus.REACHED

    metrics = scrape()

    assert metrics.value("notify_delivery_latency_seconds_count", channel="email") == 2
    assert metrics.value("notify_delivery_latency_seconds_sum", channel="email") == (
        pytest.approx(5)  # reaching the person did not move finished_at
    )
    assert metrics.value("notify_delivery_latency_seconds_count", channel="sms") == 2
    assert metrics.value("notify_delivery_latency_seconds_sum", channel="sms") == (
        pytest.approx(94)
    )
    assert metrics.value("notify_delivery_latency_seconds_bucket", channel="sms", le="60.0") == 1
    assert metrics.value("notify_delivery_latency_seconds_bucket", channel="sms", le="+Inf") == 2
    # Reached on the first try is a first-try success, as delivered is.
    assert metrics.value("notify_first_attempt_success_ratio", channel="email") == (
        pytest.approx(2 / 3)
    )
    assert metrics.value("notify_first_attempt_success_ratio", channel="sms") == (
        pytest.approx(3 / 4)
    )


def success_recent_indexes() -> set[str]:
    """The partial index on the parent and its partitions' indexes attached to it."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
            "WHERE i.inhparent = 'delivery_success_recent'::regclass"
        )
        return {"delivery_success_recent"} | {row[0] for row in cursor.fetchall()}


def test_the_latency_query_reads_the_success_recent_partial_index(ann):
    """The planner proves the query's status list implies the index's predicate."""
    finished(ann, "email", DeliveryStatus.REACHED, seconds=3)
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT indisvalid, pg_get_expr(indpred, indrelid) FROM pg_index "
            "WHERE indexrelid = 'delivery_success_recent'::regclass"
        )
        valid, predicate = cursor.fetchone()
    assert valid
    assert "'delivered'" in predicate and "'reached'" in predicate

    since = timezone.now() - timedelta(hours=1)
    with transaction.atomic(), connection.cursor() as cursor:
        # A handful of rows: a sequential scan would be cheaper, so forbid it to see
        # whether the index can serve the query at all.
        cursor.execute("SET LOCAL enable_seqscan = off")
        plan = latency_rows(since=since, bounds=[1.0, 60.0]).explain()
    assert "Seq Scan" not in plan, plan
    used = set(
        re.findall(r"(?:Index Scan using|Index Only Scan using|Bitmap Index Scan on) (\S+)", plan)
    )
    assert used and used <= success_recent_indexes(), plan
