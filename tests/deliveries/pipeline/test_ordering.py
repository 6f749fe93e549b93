"""Per-recipient order on each channel, event time, subjects and the feed's order.

The sender is called here as the send task would call it, against the real PostgreSQL,
RabbitMQ (a held delivery is published again) and the local SMTP server; the e2e
module next to this one runs the same through several worker processes.
"""

from __future__ import annotations

import uuid
from datetime import datetime, time, timedelta

import pytest
from django.utils import timezone

from deliveries.channels.email import kept_session_close
from deliveries.models import Delivery, DeliveryAttempt, DeliveryStatus
from deliveries.pipeline.attempt import delivery_attempt
from deliveries.pipeline.outcome import AttemptResult
from deliveries.pipeline.routing import notification_route
from notify.models import Category, Notification, Producer, Recipient
from notify.services import notification_accept
from tests.conftest import purge_queues
from tests.deliveries.pipeline.test_pipeline_e2e import post_event


@pytest.fixture
def mail(demo_data, smtp, settings, broker):
    """The real SMTP backend on our peer; its kept session closed and the queues emptied
    of re-published holds after."""
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST, settings.EMAIL_PORT = "127.0.0.1", smtp.port
    yield smtp
    kept_session_close()  # the next test counts its own SMTP sessions
    purge_queues(broker)


def event(
    user_id: str,
    order: str,
    *,
    occurred_at: datetime | None = None,
    subject: str = "",
    category: str = "order.shipped",
    channels: tuple[str, ...] = ("inapp", "email"),
) -> Notification:
    """Accept one event (not routed yet)."""
    key = Category.objects.get(key=category)
    if category == "security.login_code":
        payload = {"code": order}
    elif category == "promo.weekly":
        payload = {"headline": order, "url": "https://shop.example/sale"}
    else:
        payload = {"order_number": order, "delivery_date": "2026-12-03", "items_count": 1}
    accepted = notification_accept(
        producer=Producer.objects.get_or_create(name="shop")[0],
        event_id=str(uuid.uuid4()),
        user_id=user_id,
        category=key,
        payload=payload,
        channels=list(channels),
        ttl_seconds=None,
        occurred_at=occurred_at,
        subject=subject,
    )
    return Notification.objects.get(pk=accepted.notification_id)


def email_of(notification: Notification) -> Delivery:
    return Delivery.objects.get(notification=notification, channel="email")


def send(delivery: Delivery) -> AttemptResult:
    return delivery_attempt(delivery_id=delivery.pk).result


def person(user_id: str) -> Recipient:
    return Recipient.objects.create(user_id=user_id, email=f"{user_id}@example.com", locale="en")


def marketing_person(user_id: str) -> Recipient:
    """A person whom marketing reaches: consent to all of it, no quiet window."""
    from preferences.models import ConsentRecord, ConsentSource, QuietHours

    recipient = person(user_id)
    ConsentRecord.objects.create(
        recipient=recipient, granted=True, source=ConsentSource.SIGNUP, text_version="signup"
    )
    QuietHours.objects.create(recipient=recipient, start=time(0, 0), end=time(0, 0))
    return recipient


def test_a_later_email_waits_for_the_earlier_one_and_records_how_long(mail):
    person("ord-1")
    now = timezone.now()
    paid = event("ord-1", "A-1 paid", occurred_at=now - timedelta(seconds=2))
    cancelled = event("ord-1", "A-1 cancelled", occurred_at=now - timedelta(seconds=1))
    for notification in (paid, cancelled):
        notification_route(notification_id=notification.pk)

    # The worker that picked "cancelled" first is told to wait: nothing reaches SMTP.
    assert send(email_of(cancelled)) is AttemptResult.HELD
    held = email_of(cancelled)
    assert (held.status, held.attempts, mail.received) == (DeliveryStatus.QUEUED, 0, [])
    assert held.held_since is not None

    assert send(email_of(paid)) is AttemptResult.DELIVERED
    assert send(email_of(cancelled)) is AttemptResult.DELIVERED
    assert [m.subject for m in mail.received] == [
        "Order A-1 paid has shipped",
        "Order A-1 cancelled has shipped",
    ]
    attempt = DeliveryAttempt.objects.get(delivery=email_of(cancelled))
    assert attempt.held_ms > 0
    assert DeliveryAttempt.objects.get(delivery=email_of(paid)).held_ms == 0


def test_an_earlier_event_not_routed_yet_holds_the_later_one(mail):
    person("ord-2")
    paid = event("ord-2", "B-1 paid")
    cancelled = event("ord-2", "B-1 cancelled")
    notification_route(notification_id=cancelled.pk)  # its route task ran first

    assert send(email_of(cancelled)) is AttemptResult.HELD
    notification_route(notification_id=paid.pk)
    assert send(email_of(cancelled)) is AttemptResult.HELD  # paid's email is queued now
    assert send(email_of(paid)) is AttemptResult.DELIVERED
    assert send(email_of(cancelled)) is AttemptResult.DELIVERED
    assert [m.subject for m in mail.received] == [
        "Order B-1 paid has shipped",
        "Order B-1 cancelled has shipped",
    ]


def test_a_retry_of_the_earlier_one_does_not_hold_the_later_but_a_postponed_first_try_does(
    mail,
):
    person("ord-3")
    paid = event("ord-3", "C-1 paid")
    cancelled = event("ord-3", "C-1 cancelled")
    for notification in (paid, cancelled):
        notification_route(notification_id=notification.pk)
    later = timezone.now() + timedelta(minutes=5)

    # Put back before its first try (a rate limit, an open breaker): still on its way.
    Delivery.objects.filter(pk=email_of(paid).pk).update(
        status=DeliveryStatus.RETRYING, attempts=0, next_attempt_at=later
    )
    assert send(email_of(cancelled)) is AttemptResult.HELD

    # After a failed try the provider may reorder anyway: the later one goes.
    Delivery.objects.filter(pk=email_of(paid).pk).update(attempts=1)
    assert send(email_of(cancelled)) is AttemptResult.DELIVERED
    assert [m.subject for m in mail.received] == ["Order C-1 cancelled has shipped"]


def test_other_people_and_other_channels_are_not_held(mail):
    person("ord-4a")
    person("ord-4b")
    first = event("ord-4a", "D-1")
    other_person = event("ord-4b", "D-2")
    same_person_feed_only = event("ord-4a", "D-3", channels=("inapp",))
    for notification in (first, other_person, same_person_feed_only):
        notification_route(notification_id=notification.pk)

    assert send(email_of(other_person)) is AttemptResult.DELIVERED
    # The feed entry of the later event was written although the earlier email waits.
    assert Delivery.objects.get(notification=same_person_feed_only).status == "delivered"


def test_a_login_code_follows_the_same_order_as_any_category(mail):
    """Mandatory categories skip the gate, not the order."""
    person("ord-5")
    order = event("ord-5", "E-1")
    code = event("ord-5", "482913", category="security.login_code", channels=("email",))
    for notification in (order, code):
        notification_route(notification_id=notification.pk)

    assert send(email_of(code)) is AttemptResult.HELD
    assert send(email_of(order)) is AttemptResult.DELIVERED
    assert send(email_of(code)) is AttemptResult.DELIVERED
    assert [m.subject for m in mail.received] == [
        "Order E-1 has shipped",
        "Your login code: 482913",
    ]


def test_campaign_email_holds_no_order_email_or_login_code_but_waits_behind_them(mail):
    """A person's marketing email still in a campaign's backlog holds nothing else back;
    a marketing email still waits behind an earlier order email, and another campaign's."""
    marketing_person("ord-9")
    start = timezone.now() - timedelta(minutes=1)
    promo = event("ord-9", "Sale", category="promo.weekly", channels=("email",), occurred_at=start)
    order = event("ord-9", "H-1", channels=("email",), occurred_at=start + timedelta(seconds=1))
    code = event(
        "ord-9",
        "161803",
        category="security.login_code",
        channels=("email",),
        occurred_at=start + timedelta(seconds=2),
    )
    order_2 = event("ord-9", "H-2", channels=("email",), occurred_at=start + timedelta(seconds=3))
    promo_2 = event(
        "ord-9",
        "Sale 2",
        category="promo.weekly",
        channels=("email",),
        occurred_at=start + timedelta(seconds=4),
    )
    for notification in (promo, order, code, order_2, promo_2):
        notification_route(notification_id=notification.pk)
    assert email_of(promo).status == "queued"  # waiting in the campaign's backlog

    assert send(email_of(code)) is AttemptResult.HELD  # high and medium keep one order
    assert send(email_of(order)) is AttemptResult.DELIVERED  # the promo holds it not
    assert send(email_of(code)) is AttemptResult.DELIVERED
    assert send(email_of(promo_2)) is AttemptResult.HELD  # behind the promo and order_2
    assert send(email_of(promo)) is AttemptResult.DELIVERED
    assert send(email_of(promo_2)) is AttemptResult.HELD  # behind order_2 still
    assert send(email_of(order_2)) is AttemptResult.DELIVERED
    assert send(email_of(promo_2)) is AttemptResult.DELIVERED
    assert [m.subject for m in mail.received] == [
        "Order H-1 has shipped",
        "Your login code: 161803",
        "Sale",
        "Order H-2 has shipped",
        "Sale 2",
    ]
    assert DeliveryAttempt.objects.get(delivery=email_of(order)).held_ms == 0


def test_an_order_email_done_with_wakes_the_next_held_order_email_and_campaign_email(mail):
    """What a sent email held is published at once: the next held one of its own rank
    and the next held campaign email, though the campaign email comes between them."""
    marketing_person("ord-10")
    start = timezone.now() - timedelta(minutes=1)
    order = event("ord-10", "J-1", channels=("email",), occurred_at=start)
    promo = event(
        "ord-10",
        "Sale",
        category="promo.weekly",
        channels=("email",),
        occurred_at=start + timedelta(seconds=1),
    )
    order_2 = event("ord-10", "J-2", channels=("email",), occurred_at=start + timedelta(seconds=2))
    for notification in (order, promo, order_2):
        notification_route(notification_id=notification.pk)
    assert send(email_of(promo)) is AttemptResult.HELD
    assert send(email_of(order_2)) is AttemptResult.HELD
    held = {n.pk: email_of(n).enqueued_at for n in (promo, order_2)}

    assert send(email_of(order)) is AttemptResult.DELIVERED
    woken = {n.pk: email_of(n).enqueued_at for n in (promo, order_2)}
    assert all(woken[pk] > held[pk] for pk in held)  # both published again at once


def test_an_older_event_about_a_subject_already_delivered_is_superseded_not_sent(mail):
    person("ord-6")
    now = timezone.now()
    cancelled = event("ord-6", "F-1 cancelled", occurred_at=now, subject="order:F-1")
    notification_route(notification_id=cancelled.pk)
    assert send(email_of(cancelled)) is AttemptResult.DELIVERED
    # The producer retried "paid" after a network error: it arrives late, and older.
    paid = event("ord-6", "F-1 paid", occurred_at=now - timedelta(minutes=1), subject="order:F-1")
    notification_route(notification_id=paid.pk)

    assert send(email_of(paid)) is AttemptResult.SUPERSEDED
    stale = email_of(paid)
    assert (stale.status, stale.reason, stale.attempts) == ("superseded", "newer_delivered", 0)
    assert [m.subject for m in mail.received] == ["Order F-1 cancelled has shipped"]
    assert Delivery.objects.get(notification=paid, channel="inapp").status == "delivered"


def test_an_older_event_about_another_subject_is_still_sent(mail):
    person("ord-7")
    now = timezone.now()
    newer = event("ord-7", "G-1", occurred_at=now, subject="order:G-1")
    notification_route(notification_id=newer.pk)
    send(email_of(newer))
    older = event("ord-7", "G-2", occurred_at=now - timedelta(minutes=1), subject="order:G-2")
    notification_route(notification_id=older.pk)

    assert send(email_of(older)) is AttemptResult.DELIVERED


# --- Intake and the API -----------------------------------------------------------------


def test_an_event_time_too_far_ahead_is_refused_and_within_the_skew_accepted(api, settings):
    settings.NOTIFY_OCCURRED_AT_MAX_SKEW = 60
    person("ord-8")
    ahead = (timezone.now() + timedelta(minutes=5)).isoformat()
    response = post_event(api, user_id="ord-8", occurred_at=ahead)
    assert response.status_code == 422
    assert response.json()["error"]["code"] == "out_of_window"
    assert response.json()["error"]["field"] == "occurred_at"

    near = timezone.now() + timedelta(seconds=30)
    assert post_event(api, user_id="ord-8", occurred_at=near.isoformat()).status_code == 202


def test_the_status_api_shows_event_time_and_subject(api):
    person("ord-9")
    happened = timezone.now() - timedelta(hours=1)
    given = post_event(
        api, user_id="ord-9", occurred_at=happened.isoformat(), subject="order:H-1"
    ).json()["notification_id"]
    default = post_event(api, user_id="ord-9").json()["notification_id"]

    shown = api.get(f"/v1/notifications/{given}/status").json()
    assert (shown["subject"], datetime.fromisoformat(shown["occurred_at"])) == (
        "order:H-1",
        happened,
    )
    shown = api.get(f"/v1/notifications/{default}/status").json()
    assert shown["subject"] == ""
    assert shown["occurred_at"] == shown["created_at"]  # defaults to acceptance


def test_the_openapi_schema_describes_event_time_subject_and_superseded(client):
    schema = client.get("/v1/schema", HTTP_ACCEPT="application/vnd.oai.openapi+json").json()
    parts = schema["components"]["schemas"]
    assert {"occurred_at", "subject"} <= set(parts["NotificationInRequest"]["properties"])
    assert {"occurred_at", "subject"} <= set(parts["NotificationStatusOut"]["properties"])
    assert "occurred_at" in parts["FeedEntryOut"]["properties"]
    delivery = parts["DeliveryStatusOut"]["properties"]
    assert set(delivery["status"]["enum"]) == {status.value for status in DeliveryStatus}
    assert "held_ms" in delivery


# --- The feed ---------------------------------------------------------------------------


def test_the_feed_follows_event_time_and_a_late_event_between_pages_keeps_the_cursor(
    api, demo_data
):
    person("ord-10")
    now = timezone.now()

    def arrive(name: str, minutes_ago: float) -> None:
        notification = event("ord-10", name, occurred_at=now - timedelta(minutes=minutes_ago))
        notification_route(notification_id=notification.pk)

    # Accepted in another order than they happened.
    for name, minutes_ago in (("t-4", 4), ("t-1", 1), ("t-3", 3), ("t-2", 2)):
        arrive(name, minutes_ago)

    def page(cursor: str | None = None) -> tuple[list[str], str | None]:
        query = {"limit": 2, **({"cursor": cursor} if cursor else {})}
        body = api.get("/v1/users/ord-10/feed", query).json()
        return [e["title"].split()[1] for e in body["results"]], body["next_cursor"]

    first, cursor = page()
    assert first == ["t-1", "t-2"]
    arrive("t-3.5", 3.5)  # late: lands between the pages, in its place
    arrive("t-0", 0)  # newer than the cursor: on a fresh first page, not repeated later
    second, cursor = page(cursor)
    third, cursor = page(cursor)
    assert (second, third, cursor) == (["t-3", "t-3.5"], ["t-4"], None)
    assert page()[0] == ["t-0", "t-1"]
