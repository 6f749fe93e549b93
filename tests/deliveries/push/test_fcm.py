"""FCM through firebase-admin against a local FCM (token endpoint + v1 send API).

These call the sender's services in this process (firebase-admin is pointed at the
peer through settings), the way a worker would run them.
"""

from __future__ import annotations

import logging
import time
import uuid
from datetime import timedelta

import pytest
from django.utils import timezone
from firebase_admin import messaging

from deliveries.channels import fcm, fcm_app
from deliveries.models import Delivery, DeliveryAttempt, Device
from deliveries.pipeline.attempt import deliveries_attempt, delivery_attempt
from notify.models import Category, Notification, Producer, Recipient
from preferences.gate import gate_seal
from templates_admin.models import Template
from templates_admin.services import template_version_create, template_version_publish
from tests.deliveries.push.factories import queued_push
from tests.peers.drip import DripPeer

ORDER = {"order_number": "F-9", "delivery_date": "2026-12-03", "items_count": 1}


@pytest.fixture
def fcm_template(demo_data):
    category = Category.objects.get(key="order.shipped")
    template, _ = Template.objects.get_or_create(category=category, channel="fcm", locale="en")
    version = template_version_create(
        template=template,
        fields={"title": "Order {{ order_number }} shipped", "body": "Arrives {{ delivery_date }}"},
    )
    template_version_publish(version=version)
    return category


def fcm_notification(category: Category, devices: int) -> tuple[Notification, list[Delivery]]:
    """A notification with one queued FCM delivery per device, as the gate creates them."""
    recipient = Recipient.objects.create(user_id=f"fcm-{uuid.uuid4()}", locale="en")
    rows = Device.objects.bulk_create(
        [
            Device(recipient=recipient, kind="fcm", token=f"tok-{n}", platform="android")
            for n in range(devices)
        ]
    )
    producer, _ = Producer.objects.get_or_create(name="shop")
    notification = Notification.objects.create(
        producer=producer,
        event_id=str(uuid.uuid4()),
        recipient=recipient,
        category=category,
        payload=ORDER,
        fingerprint="test",
        ttl_seconds=600,
    )
    now = timezone.now()
    deliveries = Delivery.objects.bulk_create(
        [
            Delivery(
                notification=notification,
                channel="fcm",
                target=str(device.pk),
                queue=category.queue,
                next_attempt_at=now,
                deadline=now + timedelta(seconds=600),
                gate_seal=gate_seal(
                    notification_id=notification.pk, channel="fcm", target=str(device.pk)
                ),
            )
            for device in rows
        ]
    )
    return notification, deliveries


def test_600_devices_go_out_in_two_chunks_with_one_result_each(fcm_service, fcm_template, caplog):
    notification, deliveries = fcm_notification(fcm_template, 600)

    with caplog.at_level(logging.INFO, logger="deliveries.channels.fcm"):
        # As routing hands them over: one notification's FCM deliveries in one batch.
        deliveries_attempt(delivery_ids=[d.pk for d in deliveries])

    chunks = [r.getMessage() for r in caplog.records if "chunk" in r.getMessage()]
    assert chunks == [
        "fcm: sending a chunk of 500 messages",
        "fcm: sending a chunk of 100 messages",
    ]
    statuses = Delivery.objects.filter(notification=notification).values_list("status", flat=True)
    assert sorted(set(statuses)) == ["delivered"] and len(statuses) == 600
    assert DeliveryAttempt.objects.filter(delivery__notification=notification).count() == 600
    assert len(fcm_service.sends) == 600
    sent = fcm_service.sends_to("tok-599")[0]["message"]
    assert sent["notification"] == {"title": "Order F-9 shipped", "body": "Arrives 2026-12-03"}
    assert sent["data"]["notification_id"] == str(notification.pk)


def test_unregistered_token_deactivates_exactly_that_device(fcm_service, fcm_template):
    notification, deliveries = fcm_notification(fcm_template, 3)
    fcm_service.answer("tok-1", 404, "UNREGISTERED")
    fcm_service.answer("tok-2", 400, "INVALID_ARGUMENT")

    deliveries_attempt(delivery_ids=[d.pk for d in deliveries])

    rows = {d.target: d for d in Delivery.objects.filter(notification=notification)}
    devices = {str(d.pk): d for d in Device.objects.filter(recipient=notification.recipient)}
    ok, gone, bad = (str(d.target) for d in deliveries)
    assert rows[ok].status == "delivered" and devices[ok].active
    assert (rows[gone].status, rows[gone].reason) == ("failed", "rejected")
    assert devices[gone].active is False
    # A generic INVALID_ARGUMENT is about the message, never a reason to drop the device.
    assert rows[bad].status == "failed" and devices[bad].active is True


def test_an_fcm_connection_let_go_after_its_answer_never_fails_the_next_push(
    fcm_service, fcm_template
):
    _, deliveries = fcm_notification(fcm_template, 2)
    fcm_service.hang_up_after_answer("tok-0")

    delivery_attempt(delivery_id=deliveries[0].pk)
    # Sent on the connection FCM let go once it had answered the first push.
    delivery_attempt(delivery_id=deliveries[1].pk)

    assert fcm_service.hung_up == 1
    rows = Delivery.objects.filter(pk__in=[d.pk for d in deliveries])
    assert {(d.status, d.attempts) for d in rows} == {("delivered", 1)}
    assert DeliveryAttempt.objects.filter(delivery__in=deliveries).count() == 2
    assert len(fcm_service.sends_to("tok-1")) == 1


def test_fcm_quota_429_waits_for_its_retry_after_without_the_sdk_retrying(
    fcm_service, fcm_template
):
    _, deliveries = fcm_notification(fcm_template, 1)
    fcm_service.answer("tok-0", 429, "QUOTA_EXCEEDED", {"Retry-After": "40"})
    before = timezone.now()

    delivery_attempt(delivery_id=deliveries[0].pk)

    delivery = Delivery.objects.get(pk=deliveries[0].pk)
    assert delivery.status == "retrying"
    assert delivery.next_attempt_at >= before + timedelta(seconds=40)
    assert len(fcm_service.sends_to("tok-0")) == 1  # the SDK did not retry on its own


def test_canary_firebase_admin_keeps_its_send_url_where_we_point_it(fcm_service):
    # If an upgrade moves the private send URL, this fails here, not in production.
    assert "messages:send" in messaging._MessagingService.FCM_URL
    service = messaging._get_messaging_service(fcm.fcm_app())
    assert service._fcm_url == fcm_service.send_url.format(project_id="notify-test")

    class Moved:
        pass

    with pytest.raises(RuntimeError, match="_fcm_url"):
        fcm_app.configure_messaging(Moved())


def test_a_device_live_on_the_stream_is_left_out_of_the_fcm_batch(fcm_service, fcm_template):
    from deliveries.pipeline.live import device_live_clear, device_live_mark, feed_entry_mark_seen
    from notify.feed import feed_entry_create

    notification, deliveries = fcm_notification(fcm_template, 3)
    live = deliveries[2]
    device_live_mark(device_id=int(live.target), connection_id="tab-1")
    # Its stream showed the notification's feed entry: the person has it there.
    entry = feed_entry_create(notification=notification, title="Order", body="", url="")
    feed_entry_mark_seen(device_id=int(live.target), entry_id=entry.pk)
    try:
        deliveries_attempt(delivery_ids=[d.pk for d in deliveries])
    finally:
        device_live_clear(device_id=int(live.target), connection_id="tab-1")

    rows = {d.pk: d for d in Delivery.objects.filter(notification=notification)}
    assert rows[live.pk].status == "skipped_live"
    assert rows[live.pk].attempts == 0
    assert [rows[d.pk].status for d in deliveries[:2]] == ["delivered", "delivered"]
    assert len(fcm_service.sends) == 2
    assert fcm_service.sends_to("tok-2") == []


def test_a_drip_feeding_fcm_answer_is_cut_off_at_the_calls_deadline(
    fcm_service, fcm_template, settings, clean_breakers
):
    # The token endpoint is the local FCM; the send URL answers a byte every 0.2 s, well
    # inside the per-read timeout, so only the call's total deadline can end it.
    drip = DripPeer(b"HTTP/1.1 200 OK\r\nX-Drip: " + b"a" * 100_000, every=0.2, reads_first=True)
    settings.FCM_SEND_URL = f"{drip.origin}/v1/projects/{{project_id}}/messages:send"
    settings.NOTIFY_PUSH_REQUEST_TIMEOUT = 5.0
    settings.NOTIFY_PROVIDER_CALL_DEADLINES = {
        **settings.NOTIFY_PROVIDER_CALL_DEADLINES,
        "fcm": 1.0,
    }
    _, deliveries = fcm_notification(fcm_template, 1)
    started = time.monotonic()
    try:
        delivery_attempt(delivery_id=deliveries[0].pk)
        elapsed = time.monotonic() - started
        assert drip.cut_off.wait(5), "the connection to the dripping FCM stayed open"
    finally:
        drip.stop()

    # Without the deadline the answer would take hours; the sender is back long before.
    assert elapsed < 30, f"the sender was held {elapsed:.0f} s"
    delivery = Delivery.objects.get(pk=deliveries[0].pk)
    attempt = DeliveryAttempt.objects.get(delivery=delivery)
    assert attempt.outcome == "transient"
    assert delivery.status == "retrying"  # a timeout is retried like any transient failure


# --- FCM goes through the same attempt as every channel -------------------------------


def fcm_event(category: Category, recipient: Recipient, *, occurred_at, subject: str = ""):
    """A notification with one queued FCM delivery to the recipient's first device, made
    as routing makes them (ordered by recipient and time)."""
    device = Device.objects.filter(recipient=recipient, kind="fcm").order_by("pk").first()
    if device is None:
        device = Device.objects.create(
            recipient=recipient, kind="fcm", token=f"tok-{uuid.uuid4()}", platform="android"
        )
    return queued_push(
        category, recipient, device, payload=ORDER, occurred_at=occurred_at, subject=subject
    )


def test_an_fcm_push_waits_for_an_earlier_one_to_the_same_person(fcm_service, fcm_template):
    person = Recipient.objects.create(user_id=f"fcm-{uuid.uuid4()}", locale="en")
    now = timezone.now()
    earlier = fcm_event(fcm_template, person, occurred_at=now - timedelta(minutes=1))
    later = fcm_event(fcm_template, person, occurred_at=now)

    [report] = deliveries_attempt(delivery_ids=[later.pk])
    assert report.result.value == "held"
    assert fcm_service.sends == []

    # Together in one batch they go (handed to FCM in one multicast, the earlier first).
    deliveries_attempt(delivery_ids=[later.pk, earlier.pk])
    statuses = Delivery.objects.filter(pk__in=[earlier.pk, later.pk]).values_list(
        "status", flat=True
    )
    assert set(statuses) == {"delivered"}
    sent = {s["message"]["data"]["notification_id"] for s in fcm_service.sends}
    assert sent == {str(earlier.notification_id), str(later.notification_id)}


def test_an_older_fcm_push_is_superseded_by_a_newer_one_already_delivered(
    fcm_service, fcm_template
):
    person = Recipient.objects.create(user_id=f"fcm-{uuid.uuid4()}", locale="en")
    now = timezone.now()
    newer = fcm_event(fcm_template, person, occurred_at=now, subject="order:F-9")
    deliveries_attempt(delivery_ids=[newer.pk])
    older = fcm_event(
        fcm_template, person, occurred_at=now - timedelta(hours=1), subject="order:F-9"
    )

    deliveries_attempt(delivery_ids=[older.pk])

    older.refresh_from_db()
    assert (older.status, older.reason) == ("superseded", "newer_delivered")
    assert len(fcm_service.sends) == 1  # only the newer one


def test_an_fcm_push_past_its_deadline_is_not_sent(fcm_service, fcm_template):
    person = Recipient.objects.create(user_id=f"fcm-{uuid.uuid4()}", locale="en")
    late = fcm_event(fcm_template, person, occurred_at=timezone.now())
    Delivery.objects.filter(pk=late.pk).update(deadline=timezone.now() - timedelta(seconds=1))

    deliveries_attempt(delivery_ids=[late.pk])

    late.refresh_from_db()
    assert (late.status, late.reason) == ("expired", "deadline_passed")
    assert fcm_service.sends == []


def test_the_fcm_rate_limit_is_charged_per_message_in_a_batch(
    fcm_service, fcm_template, settings, clean_breakers
):
    settings.NOTIFY_PROVIDER_RATE_LIMITS = {**settings.NOTIFY_PROVIDER_RATE_LIMITS, "fcm": "1:1"}
    _, deliveries = fcm_notification(fcm_template, 3)

    deliveries_attempt(delivery_ids=[d.pk for d in deliveries])

    rows = list(Delivery.objects.filter(pk__in=[d.pk for d in deliveries]).order_by("pk"))
    assert [row.status for row in rows] == ["delivered", "retrying", "retrying"]
    for postponed in rows[1:]:  # put back uncharged, for when the bucket has a token
        assert postponed.attempts == 0
        assert postponed.last_error == "postponed: fcm rate limit"
        assert postponed.next_attempt_at > timezone.now()
    assert len(fcm_service.sends) == 1
