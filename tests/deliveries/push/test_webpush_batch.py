"""A batch of Web Push deliveries is posted overlapped, to a real local push service that
checks VAPID and decrypts every payload: many in flight at once, each with its own
deadline, one person's pushes still in order, supersede, deadlines and the rate limit
as for a push sent alone. These run the sender's attempt in this process."""

from __future__ import annotations

import time
import uuid
from datetime import datetime, timedelta

import pytest
from django.utils import timezone

from deliveries.models import Delivery, DeliveryAttempt, Device
from deliveries.pipeline.attempt import deliveries_attempt
from notify.models import Category, Recipient
from tests.deliveries.push.factories import queued_push

ORDER = {"order_number": "B-1", "delivery_date": "2026-12-03", "items_count": 1}
ANSWER_SECONDS = 0.05  # how long the push service takes to answer each push


@pytest.fixture
def batch_env(demo_data, push_service, clean_breakers, settings):
    settings.NOTIFY_WEBPUSH_CONCURRENCY = 16
    return Category.objects.get(key="order.shipped")


def person_with_browser(push_service, name: str) -> tuple[Recipient, Device]:
    """A person with one browser subscribed at the local push service as `name`."""
    recipient = Recipient.objects.create(user_id=f"wpb-{uuid.uuid4()}", locale="en")
    _, body = push_service.subscribe(name)
    device = Device.objects.create(
        recipient=recipient,
        kind="webpush",
        endpoint=body["endpoint"],
        p256dh=body["keys"]["p256dh"],
        auth=body["keys"]["auth"],
    )
    return recipient, device


def push_event(
    category: Category,
    recipient: Recipient,
    device: Device,
    *,
    occurred_at: datetime,
    order: str = "B-1",
    subject: str = "",
) -> Delivery:
    """A notification with one queued Web Push delivery to the device, as routing
    makes them."""
    return queued_push(
        category,
        recipient,
        device,
        payload={**ORDER, "order_number": order},
        occurred_at=occurred_at,
        subject=subject,
    )


def statuses(deliveries: list[Delivery]) -> list[str]:
    rows = dict(
        Delivery.objects.filter(pk__in=[d.pk for d in deliveries]).values_list("pk", "status")
    )
    return [rows[d.pk] for d in deliveries]


def test_a_batch_of_200_pushes_to_a_slow_push_service_goes_out_in_seconds(batch_env, push_service):
    push_service.answer_after("burst", ANSWER_SECONDS)
    now = timezone.now()
    deliveries = []
    for n in range(200):
        recipient, device = person_with_browser(push_service, f"burst.{n}")
        deliveries.append(push_event(batch_env, recipient, device, occurred_at=now))

    started = time.monotonic()
    deliveries_attempt(delivery_ids=[d.pk for d in deliveries])
    elapsed = time.monotonic() - started

    one_at_a_time = len(deliveries) * ANSWER_SECONDS
    assert elapsed < 3.0, (
        f"200 pushes took {elapsed:.2f} s; one at a time they take at least "
        f"{one_at_a_time:.0f} s (200 x {ANSWER_SECONDS * 1000:.0f} ms)"
    )
    assert statuses(deliveries) == ["delivered"] * 200
    assert (
        DeliveryAttempt.objects.filter(delivery__in=deliveries, outcome="delivered").count() == 200
    )
    accepted = [r for r in push_service.received if 200 <= r.status < 300]
    assert len(accepted) == 200
    # Every browser got its own notification, decrypted with its own keys.
    sent = {r.subscriber: r.json()["notification_id"] for r in accepted}
    assert sent == {f"burst.{n}": str(d.notification_id) for n, d in enumerate(deliveries)}
    # Overlapped, and never more at once than the concurrency setting.
    assert 1 < push_service.most_in_flight["burst"] <= 16
    print(
        f"200 pushes at {ANSWER_SECONDS * 1000:.0f} ms each: {elapsed:.2f} s "
        f"(one at a time: >= {one_at_a_time:.0f} s)"
    )


def test_one_persons_pushes_in_a_batch_arrive_in_order_one_after_the_other(batch_env, push_service):
    push_service.answer_after("amy", ANSWER_SECONDS)
    push_service.answer_after("others", ANSWER_SECONDS)
    amy, browser = person_with_browser(push_service, "amy.laptop")
    now = timezone.now()
    amys = [
        push_event(
            batch_env, amy, browser, occurred_at=now - timedelta(minutes=5 - n), order=f"A-{n}"
        )
        for n in range(5)
    ]
    others = []
    for n in range(20):
        recipient, device = person_with_browser(push_service, f"others.{n}")
        others.append(push_event(batch_env, recipient, device, occurred_at=now))

    # Handed over in any order, as a wake or a re-drive may bring them.
    deliveries_attempt(delivery_ids=[d.pk for d in [*reversed(amys), *others]])

    assert statuses(amys + others) == ["delivered"] * 25
    got = [r.json()["title"] for r in push_service.accepted_for("amy.laptop")]
    assert got == [f"Order A-{n} shipped" for n in range(5)]
    # Each of hers went only after the answer to the one before; the others overlapped.
    assert push_service.most_in_flight["amy"] == 1
    assert push_service.most_in_flight["others"] > 1


def test_a_superseded_or_expired_push_in_a_batch_is_not_sent_and_the_rest_are(
    batch_env, push_service
):
    now = timezone.now()
    ben, browser = person_with_browser(push_service, "ben.phone")
    newer = push_event(batch_env, ben, browser, occurred_at=now, order="N-2", subject="order:N")
    deliveries_attempt(delivery_ids=[newer.pk])
    older = push_event(
        batch_env,
        ben,
        browser,
        occurred_at=now - timedelta(hours=1),
        order="N-1",
        subject="order:N",
    )
    cat, cat_browser = person_with_browser(push_service, "cat.phone")
    late = push_event(batch_env, cat, cat_browser, occurred_at=now)
    Delivery.objects.filter(pk=late.pk).update(deadline=timezone.now() - timedelta(seconds=1))
    rest = []
    for n in range(6):
        recipient, device = person_with_browser(push_service, f"rest.{n}")
        rest.append(push_event(batch_env, recipient, device, occurred_at=now))

    deliveries_attempt(delivery_ids=[d.pk for d in [older, late, *rest]])

    older.refresh_from_db()
    late.refresh_from_db()
    assert (older.status, older.reason) == ("superseded", "newer_delivered")
    assert (late.status, late.reason) == ("expired", "deadline_passed")
    assert statuses(rest) == ["delivered"] * 6
    assert [r.json()["title"] for r in push_service.accepted_for("ben.phone")] == [
        "Order N-2 shipped"
    ]
    assert push_service.deliveries_to("cat.phone") == []


def test_a_stuck_push_in_a_batch_ends_at_its_own_deadline_without_holding_the_others(
    batch_env, push_service, settings
):
    settings.NOTIFY_PROVIDER_CALL_DEADLINES = {
        **settings.NOTIFY_PROVIDER_CALL_DEADLINES,
        "webpush": 1.0,
    }
    push_service.answer_after("stuck", 4.0)
    now = timezone.now()
    recipient, device = person_with_browser(push_service, "stuck.tab")
    stuck = push_event(batch_env, recipient, device, occurred_at=now)
    fine = []
    for n in range(10):
        recipient, device = person_with_browser(push_service, f"fine.{n}")
        fine.append(push_event(batch_env, recipient, device, occurred_at=now))

    started = time.monotonic()
    deliveries_attempt(delivery_ids=[d.pk for d in [stuck, *fine]])
    elapsed = time.monotonic() - started

    assert elapsed < 3.0, f"the batch waited {elapsed:.1f} s for a push past its 1 s deadline"
    assert statuses(fine) == ["delivered"] * 10
    stuck.refresh_from_db()
    assert stuck.status == "retrying"
    attempt = DeliveryAttempt.objects.get(delivery=stuck)
    assert (attempt.outcome, attempt.status_code) == ("transient", "timeout")


def test_the_web_push_rate_limit_is_charged_per_message_in_an_overlapped_batch(
    batch_env, push_service, settings
):
    settings.NOTIFY_PROVIDER_RATE_LIMITS = {
        **settings.NOTIFY_PROVIDER_RATE_LIMITS,
        "webpush": "0.01:2",
    }
    now = timezone.now()
    deliveries = []
    for n in range(5):
        recipient, device = person_with_browser(push_service, f"rated.{n}")
        deliveries.append(push_event(batch_env, recipient, device, occurred_at=now))

    deliveries_attempt(delivery_ids=[d.pk for d in deliveries])

    assert sorted(statuses(deliveries)) == ["delivered"] * 2 + ["retrying"] * 3
    assert len([r for r in push_service.received if 200 <= r.status < 300]) == 2
