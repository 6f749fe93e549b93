"""Hostile push endpoints: a drip-feeding answer, huge or garbage Retry-After, and many
bad endpoints on one host. The sender's services run in this process against real local
peers, the way a worker runs them."""

from __future__ import annotations

import socket
import threading
import time
import uuid
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from deliveries.channels.base import parse_retry_after
from deliveries.models import Delivery, DeliveryAttempt, Device
from deliveries.pipeline.attempt import delivery_attempt
from flow.breaker import breaker_state
from notify.models import Category, Notification, Producer, Recipient
from preferences.gate import gate_seal
from tests.deliveries.push.peer import PushService
from tests.peers.drip import DripPeer

ORDER = {"order_number": "H-1", "delivery_date": "2026-12-03", "items_count": 1}


@pytest.fixture
def other_push_service(monkeypatch):
    """A second push service on its own port: another push host."""
    monkeypatch.setenv("NOTIFY_TEST_PUSH_PORT", "0")
    service = PushService()
    service.start()
    yield service
    service.stop()


def webpush_deliveries(devices: list[dict], *, ttl: int = 600) -> list[Delivery]:
    """One queued Web Push delivery per subscription body, as the gate creates them."""
    category = Category.objects.get(key="order.shipped")
    recipient = Recipient.objects.create(user_id=f"hostile-{uuid.uuid4()}", locale="en")
    rows = [
        Device.objects.create(
            recipient=recipient,
            kind="webpush",
            endpoint=body["endpoint"],
            p256dh=body["keys"]["p256dh"],
            auth=body["keys"]["auth"],
        )
        for body in devices
    ]
    producer, _ = Producer.objects.get_or_create(name="shop")
    notification = Notification.objects.create(
        producer=producer,
        event_id=str(uuid.uuid4()),
        recipient=recipient,
        category=category,
        payload=ORDER,
        fingerprint="test",
        ttl_seconds=ttl,
    )
    now = timezone.now()
    return [
        Delivery.objects.create(
            notification=notification,
            channel="webpush",
            target=str(device.pk),
            queue=category.queue,
            next_attempt_at=now,
            deadline=now + timedelta(seconds=ttl),
            gate_seal=gate_seal(
                notification_id=notification.pk, channel="webpush", target=str(device.pk)
            ),
        )
        for device in rows
    ]


def host_of(service: PushService) -> str:
    return f"webpush:{service.origin.split('://', 1)[1]}"


# --- a total deadline for the call ---------------------------------------------------------


def attempt_in_a_sender_thread(delivery_id: int) -> None:
    try:
        delivery_attempt(delivery_id=delivery_id)
    finally:
        connection.close()


def test_a_drip_feeding_push_endpoint_is_cut_off_at_the_calls_deadline(
    transactional_db, demo_data, push_service, settings, clean_breakers, session_worker_paused
):
    # The timed-out push is published for its retry, and its row is committed: a running
    # session worker would take that retry and try again before the row is read below.
    # A byte every 0.2 s: well inside the 5 s per-read timeout, and an answer of hours.
    drip = DripPeer(
        b"HTTP/1.1 201 Created\r\nX-Drip: " + b"a" * 100_000, every=0.2, reads_first=True
    )
    settings.WEBPUSH_ALLOWED_ORIGINS = [drip.origin]
    settings.NOTIFY_PUSH_REQUEST_TIMEOUT = 5.0
    settings.NOTIFY_PROVIDER_CALL_DEADLINES = {
        **settings.NOTIFY_PROVIDER_CALL_DEADLINES,
        "webpush": 1.0,
    }
    _, body = push_service.subscribe("dripping")
    body["endpoint"] = f"{drip.origin}/push/dripping"
    [delivery] = webpush_deliveries([body])
    try:
        sender = threading.Thread(target=attempt_in_a_sender_thread, args=(delivery.pk,))
        sender.start()
        # Without the deadline the answer would take hours; the sender is back long before.
        sender.join(timeout=60)
        assert not sender.is_alive(), "the sender thread is still held by the endpoint"
        assert drip.cut_off.wait(5), "the connection to the dripping endpoint stayed open"
    finally:
        drip.stop()

    delivery.refresh_from_db()
    attempt = DeliveryAttempt.objects.get(delivery=delivery)
    assert (attempt.outcome, attempt.status_code) == ("transient", "timeout")
    assert "deadline" in attempt.response
    assert delivery.status == "retrying"  # a timeout is retried like any transient failure


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("999999999999", 28 * 24 * 3600.0),  # believed only up to the ceiling
        ("9" * 400, 28 * 24 * 3600.0),  # past a float: still the ceiling, no OverflowError
        ("garbage", None),
        ("-5", None),
        ("1e9", None),
        ("Fri, 31 Dec 9999 23:59:59 GMT", 28 * 24 * 3600.0),
        ("Wed, 21 Oct 2015 07:28:00 GMT", 0.0),  # in the past: now
        ("Mon, 99 Foo 2015 99:99:99 GMT", None),
        ("", None),
        ("  30  ", 30.0),
    ],
)
def test_retry_after_is_parsed_safely_whatever_the_endpoint_sends(settings, value, expected):
    settings.NOTIFY_PUSH_RETRY_AFTER_MAX = 28 * 24 * 3600.0
    assert parse_retry_after(value) == expected


def test_a_huge_retry_after_ends_the_push_as_expired_instead_of_a_stuck_row(
    demo_data, push_service, clean_breakers
):
    _, body = push_service.subscribe("far-future")
    push_service.answer("far-future", (503, {"Retry-After": "999999999999"}))
    [delivery] = webpush_deliveries([body], ttl=600)

    delivery_attempt(delivery_id=delivery.pk)

    delivery.refresh_from_db()
    # The wait runs past the 10-minute deadline: expired now, not `sending` forever.
    assert (delivery.status, delivery.reason) == ("expired", "deadline_passed")


# --- breakers per push service host ---------------------------------------------------------


def test_hostile_endpoints_on_one_host_never_open_a_breaker_and_lose_their_devices(
    demo_data, push_service, other_push_service, settings, clean_breakers
):
    settings.NOTIFY_BREAKER_FAILURES = 3
    settings.WEBPUSH_ALLOWED_ORIGINS = [push_service.origin, other_push_service.origin]
    hostile = []
    for n in range(10):
        _, body = other_push_service.subscribe(f"hostile{n}")
        other_push_service.answer(f"hostile{n}", (401 if n % 2 else 410, {}))
        hostile.append(body)
    _, healthy = push_service.subscribe("healthy")
    bad = webpush_deliveries(hostile)
    [good] = webpush_deliveries([healthy])

    for delivery in bad:
        delivery_attempt(delivery_id=delivery.pk)
    delivery_attempt(delivery_id=good.pk)

    assert breaker_state(provider=host_of(other_push_service)) == "closed"
    assert breaker_state(provider=host_of(push_service)) == "closed"
    failed = Delivery.objects.filter(pk__in=[d.pk for d in bad])
    assert set(failed.values_list("status", "reason")) == {("failed", "rejected")}
    hostile_devices = Device.objects.filter(pk__in=[int(d.target) for d in bad])
    assert set(hostile_devices.values_list("active", flat=True)) == {False}
    good.refresh_from_db()
    assert good.status == "delivered"
    assert len(push_service.accepted_for("healthy")) == 1


def test_a_failing_push_host_opens_only_its_own_breaker(
    demo_data, push_service, other_push_service, settings, clean_breakers
):
    settings.NOTIFY_BREAKER_FAILURES = 3
    settings.WEBPUSH_ALLOWED_ORIGINS = [push_service.origin, other_push_service.origin]
    down = []
    for n in range(4):
        _, body = other_push_service.subscribe(f"down{n}")
        other_push_service.answer(f"down{n}", (503, {}))
        down.append(body)
    _, healthy = push_service.subscribe("fine")
    failing = webpush_deliveries(down)
    [good] = webpush_deliveries([healthy])

    for delivery in failing[:3]:
        delivery_attempt(delivery_id=delivery.pk)
    delivery_attempt(delivery_id=good.pk)
    delivery_attempt(delivery_id=failing[3].pk)

    assert breaker_state(provider=host_of(other_push_service)) == "open"
    assert breaker_state(provider=host_of(push_service)) == "closed"
    good.refresh_from_db()
    assert good.status == "delivered"
    # The fourth send to the failing host waits for its breaker: postponed, not sent.
    held = Delivery.objects.get(pk=failing[3].pk)
    assert held.status == "retrying" and "circuit open" in held.last_error
    assert other_push_service.deliveries_to("down3") == []
    # Devices on a host that is down are not deactivated: it is not their fault.
    assert set(
        Device.objects.filter(pk=int(failing[0].target)).values_list("active", flat=True)
    ) == {True}


# --- a kept connection the push service let go ---------------------------------------------


def test_a_connection_let_go_after_its_answer_never_fails_the_next_push(
    demo_data, push_service, clean_breakers
):
    _, first_body = push_service.subscribe("lets-go")
    _, next_body = push_service.subscribe("next-in-line")
    push_service.hang_up_after_answer("lets-go")
    first, following = webpush_deliveries([first_body, next_body])

    delivery_attempt(delivery_id=first.pk)
    # Sent on the connection the service let go once it had answered the first push.
    delivery_attempt(delivery_id=following.pk)

    assert push_service.hung_up == 1
    for delivery in (first, following):
        delivery.refresh_from_db()
        assert (delivery.status, delivery.attempts) == ("delivered", 1)
        [attempt] = DeliveryAttempt.objects.filter(delivery=delivery)
        assert attempt.outcome == "delivered"
    [received] = push_service.accepted_for("next-in-line")
    assert received.json()["notification_id"] == str(following.notification_id)


# --- a kept connection gone half-dead while idle -------------------------------------------


def test_a_kept_connection_idle_past_its_limit_is_replaced_before_the_next_push(
    demo_data, push_service, clean_breakers, settings
):
    """A connection left half-dead after its answer (never closed, never read again: what
    a NAT that forgot it looks like) is not used once it has been idle past the limit: the
    next push goes out at once on a new connection instead of waiting out its deadline."""
    settings.NOTIFY_PUSH_KEPT_IDLE_MAX = 0.2
    settings.NOTIFY_PROVIDER_CALL_DEADLINES = {
        **settings.NOTIFY_PROVIDER_CALL_DEADLINES,
        "webpush": 3.0,
    }
    _, first_body = push_service.subscribe("goes-silent")
    _, next_body = push_service.subscribe("after-a-pause")
    push_service.go_silent_after_answer("goes-silent")
    first, following = webpush_deliveries([first_body, next_body])

    delivery_attempt(delivery_id=first.pk)
    time.sleep(0.5)  # idle past the limit
    opened_before = push_service.connections
    delivery_attempt(delivery_id=following.pk)

    for delivery in (first, following):
        delivery.refresh_from_db()
        assert (delivery.status, delivery.attempts) == ("delivered", 1), delivery.last_error
    assert push_service.connections == opened_before + 1
    [received] = push_service.accepted_for("after-a-pause")
    assert received.json()["notification_id"] == str(following.notification_id)


def test_push_connections_ask_the_kernel_to_probe_them_while_idle():
    """TCP keepalive on every push connection, so one whose peer vanished without a close
    reads as dropped when next taken from the pool."""
    from egress.deadline import keepalive_socket_options

    options = keepalive_socket_options()
    assert (socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1) in options
    assert (socket.IPPROTO_TCP, socket.TCP_KEEPIDLE, 15) in options
