"""/metrics shows, in Prometheus text format, what really happened.

Numbers come from the database, the broker and Redis at scrape time, so the worker
process that did the sending needs no metrics of its own. (How the database's counts
stay cheap — rollups folded by beat — is tests/deliveries/ops/test_metrics_counts.py.)
"""

from __future__ import annotations

import socket
import uuid
from contextlib import contextmanager

import pytest
from django.test import Client, override_settings
from django_redis import get_redis_connection
from kombu import Producer

from config.celery import app
from deliveries.models import Delivery
from deliveries.tasks import metrics_counts_fold
from notify.models import Outbox
from tests.waiting import wait_for

ORDER = {"order_number": "M-1", "delivery_date": "2026-12-03", "items_count": 1}
UNSETTLED = ("queued", "sending", "retrying")


def post_event(api, user_id: str, channels: list[str]) -> str:
    response = api.post(
        "/v1/notifications",
        {
            "event_id": str(uuid.uuid4()),
            "user_id": user_id,
            "category": "order.shipped",
            "payload": ORDER,
            "channels": channels,
        },
        format="json",
    )
    assert response.status_code == 202, response.content
    return response.json()["notification_id"]


def forget_breakers() -> None:
    redis = get_redis_connection("default")
    keys = list(redis.scan_iter("notify:breaker:*"))
    if keys:
        redis.delete(*keys)


def wait_settled(notification_ids: list[str], expected: int, *, timeout: float, what: str):
    """Wait until these notifications have `expected` deliveries, none still in flight."""
    rows = Delivery.objects.filter(notification_id__in=notification_ids)

    def check() -> bool:
        found = list(rows.values_list("status", flat=True))
        return len(found) == expected and not any(s in UNSETTLED for s in found)

    try:
        wait_for(check, timeout=timeout, what=what)
    except AssertionError as error:
        found = list(rows.values_list("channel", "status", "reason", "attempts"))
        raise AssertionError(f"{error}; deliveries: {found}") from None
    # The relay marks a batch published after publishing all of it, so a notification
    # can be delivered a moment before its outbox row says so.
    wait_for(
        lambda: not Outbox.objects.filter(published_at__isnull=True).exists(),
        what="the outbox relay to mark every row published",
    )


@pytest.mark.e2e
def test_metrics_after_a_run_show_delivered_dead_and_suppressed_per_channel(
    api, pipeline, scrape, quick_email_retries
):
    smtp = pipeline
    for n in range(5):
        api.put(f"/v1/users/m{n}", {"email": f"m{n}@example.com"}, format="json")
    api.put("/v1/users/no-mail", {"locale": "en"}, format="json")

    delivered = [post_event(api, f"m{n}", ["inapp", "email"]) for n in range(5)]
    wait_settled(delivered, 10, timeout=30, what="10 deliveries delivered")

    smtp.handler.default_data_answer = "451 4.3.0 Mailbox busy, try later"
    dead = []
    for n in range(2):
        # One at a time, forgetting the SMTP breaker in between: 12 failures in a few
        # seconds would open it (NOTIFY_BREAKER_FAILURES) and add its cooldown here.
        forget_breakers()
        dead.append(post_event(api, f"m{n}", ["email"]))
        wait_settled(dead[-1:], 1, timeout=30, what=f"dead delivery {n + 1}")
    suppressed = [post_event(api, "no-mail", ["email"])]
    wait_settled(dead + suppressed, 3, timeout=30, what="2 dead and 1 suppressed")

    # Each dead delivery's message is rejected into dead_letter just after its row is written
    # (no dead-letter consumer runs here, so they wait in the queue).
    metrics = wait_for(
        lambda: (m := scrape()).value("notify_queue_depth", queue="dead_letter") == 2 and m,
        what="2 messages in dead_letter",
    )
    assert metrics.value("notify_dead_letters_open") == 0  # none moved into the table yet
    assert metrics.value("notify_deliveries", channel="email", status="delivered") == 5
    assert metrics.value("notify_deliveries", channel="inapp", status="delivered") == 5
    assert metrics.value("notify_deliveries", channel="email", status="dead") == 2
    assert metrics.value("notify_deliveries", channel="email", status="suppressed") == 1
    assert metrics.value("notify_deliveries", channel="sms", status="delivered") == 0
    assert metrics.value("notify_dead_deliveries") == 2
    # Each attempt names its provider: the delivered emails all went through SMTP.
    assert metrics.value("notify_delivered_by_provider", channel="email", provider="smtp") == 5
    assert (
        metrics.value(
            "notify_notifications_accepted_total", category="order.shipped", queue="medium"
        )
        == 8
    )
    # Email: 5 first-try successes out of 7 tried; the suppressed one was never tried.
    assert metrics.value("notify_first_attempt_success_ratio", channel="email") == pytest.approx(
        5 / 7
    )
    assert metrics.value("notify_first_attempt_success_ratio", channel="inapp") == 1.0

    # Latency: each channel counts its own 5 deliveries; no other channel has samples.
    for channel in ("email", "inapp"):
        assert metrics.value("notify_delivery_latency_seconds_count", channel=channel) == 5
        assert (
            metrics.value("notify_delivery_latency_seconds_bucket", channel=channel, le="+Inf") == 5
        )
        assert (
            metrics.value("notify_delivery_latency_seconds_bucket", channel=channel, le="60.0") == 5
        )
        assert metrics.value("notify_delivery_latency_seconds_sum", channel=channel) > 0
    assert metrics.labels_of("notify_delivery_latency_seconds_count", "channel") == {
        "email",
        "inapp",
    }
    assert metrics.value("notify_outbox_oldest_unpublished_age_seconds") == 0
    assert metrics.value("notify_metrics_source_up", source="database") == 1
    assert metrics.value("notify_metrics_source_up", source="broker") == 1

    # Nothing was folded yet: those counts were all read from the changed rows. Once beat
    # folds them into the rollups, a scrape says the same.
    assert metrics_counts_fold() == {"accepted": 8, "deliveries": 13}
    folded = scrape()
    for channel, status, count in [
        ("email", "delivered", 5),
        ("inapp", "delivered", 5),
        ("email", "dead", 2),
        ("email", "suppressed", 1),
    ]:
        assert folded.value("notify_deliveries", channel=channel, status=status) == count
    assert folded.value("notify_dead_deliveries") == 2
    assert (
        folded.value(
            "notify_notifications_accepted_total", category="order.shipped", queue="medium"
        )
        == 8
    )
    assert folded.value("notify_first_attempt_success_ratio", channel="email") == pytest.approx(
        5 / 7
    )


@contextmanager
def consumer_paused(worker, queue: str):
    """The test worker stops taking `queue`, so what is published there stays there."""
    destination = [f"{worker.name}@{socket.gethostname()}"]
    app.control.cancel_consumer(queue, destination=destination, reply=True, timeout=5)
    try:
        # The reply may come late on a busy machine: trust only the broker's own count.
        wait_for(lambda: consumers(queue) == 0, what=f"the worker to stop consuming {queue}")
        yield
    finally:
        app.control.add_consumer(queue, destination=destination, reply=True, timeout=5)
        wait_for(lambda: consumers(queue) > 0, what=f"the worker to consume {queue} again")


def consumers(queue: str) -> int:
    with app.connection_for_read() as conn:
        _, _, count = conn.default_channel.queue_declare(queue=queue, passive=True)
        return count


@pytest.mark.e2e
def test_queue_depth_of_low_reads_the_messages_waiting_in_it(
    pipeline, broker, celery_worker, scrape
):
    with consumer_paused(celery_worker, "low"):
        try:
            producer = Producer(broker.default_channel)
            for n in range(100):
                producer.publish({"waiting": n}, exchange="notify", routing_key="low")
            metrics = scrape()
        finally:
            broker.default_channel.queue_purge("low")
    assert metrics.value("notify_queue_depth", queue="low") == 100
    assert metrics.value("notify_queue_depth", queue="high") == 0
    assert metrics.value("notify_queue_depth", queue="dead_letter") == 0


def test_push_drops_and_breaker_state_are_read_from_redis(db, broker, scrape):
    redis = get_redis_connection("default")
    redis.set("notify:metrics:push_drops:webpush", 3)
    redis.set("notify:breaker:fcm:state", "open")
    redis.set("notify:breaker:smtp:state", "closed")
    try:
        metrics = scrape()
    finally:
        redis.delete(
            "notify:metrics:push_drops:webpush",
            "notify:breaker:fcm:state",
            "notify:breaker:smtp:state",
        )
    assert metrics.value("notify_push_drops_total", channel="webpush") == 3
    assert metrics.value("notify_circuit_breaker_state", provider="fcm") == 2
    assert metrics.value("notify_circuit_breaker_state", provider="smtp") == 0
    assert metrics.value("notify_metrics_source_up", source="redis") == 1


def test_metrics_still_answer_with_redis_down_and_say_which_source_is_missing(db, broker):
    from tests.notify.ops.test_health import redis_at_closed_port

    with override_settings(**redis_at_closed_port()):
        response = Client().get("/metrics")
    assert response.status_code == 200
    text = response.content.decode()
    assert 'notify_metrics_source_up{source="redis"} 0.0' in text
    assert 'notify_metrics_source_up{source="database"} 1.0' in text


@override_settings(NOTIFY_METRICS_TOKEN="scrape-secret")
def test_metrics_with_a_token_configured_need_that_bearer_token(db, broker):
    assert Client().get("/metrics").status_code == 401
    wrong = Client().get("/metrics", headers={"Authorization": "Bearer nope"})
    assert wrong.status_code == 401
    right = Client().get("/metrics", headers={"Authorization": "Bearer scrape-secret"})
    assert right.status_code == 200
    assert b"notify_deliveries" in right.content


@override_settings(NOTIFY_METRICS_TOKEN="")
def test_metrics_without_a_token_refuse_clients_off_the_host(db, broker):
    assert Client(REMOTE_ADDR="10.1.2.3").get("/metrics").status_code == 403
    assert Client(REMOTE_ADDR="::1").get("/metrics").status_code == 200
