"""Hard bounces: an address that bounced for good is not tried again on that channel."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User

from deliveries.channels.email import kept_session_close
from deliveries.models import AddressSuppression, Delivery, DeliveryStatus, Reason
from deliveries.pipeline.attempt import delivery_attempt
from deliveries.pipeline.routing import notification_route
from notify.models import Category, Notification, Producer, Recipient
from notify.roles import redrive_group_ensure, support_group_ensure

ORDER = {"order_number": "A-1", "delivery_date": "2026-12-03", "items_count": 1}


@pytest.fixture
def mail(smtp, settings):
    """In-process sends go to the SMTP peer over the real SMTP backend."""
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST, settings.EMAIL_PORT = "127.0.0.1", smtp.port
    settings.NOTIFY_CHANNELS_ENABLED = ["inapp", "email"]
    yield smtp
    kept_session_close()  # a later test counts the SMTP sessions it opens itself


@pytest.fixture
def person(demo_data):
    return Recipient.objects.create(user_id="b1", email="Bounce@Example.com", locale="en")


def order_email(person: Recipient) -> Delivery:
    """Route an order.shipped email to `person`; its delivery row."""
    producer, _ = Producer.objects.get_or_create(name="bounces")
    notification = Notification.objects.create(
        producer=producer,
        event_id=f"e{Notification.objects.count()}",
        recipient=person,
        category=Category.objects.get(key="order.shipped"),
        payload=ORDER,
        channels=["email"],
        fingerprint="x",
    )
    notification_route(notification_id=str(notification.pk))
    return Delivery.objects.get(notification=notification, channel="email")


def sent(delivery: Delivery) -> Delivery:
    delivery_attempt(delivery_id=delivery.pk)
    delivery.refresh_from_db()
    return delivery


def test_a_550_on_the_recipient_suppresses_the_address_and_later_emails_are_not_tried(person, mail):
    mail.handler.rcpt_answers.append("550 5.1.1 <bounce@example.com>: no such user")
    first = sent(order_email(person))
    assert (first.status, first.reason) == (DeliveryStatus.FAILED, Reason.REJECTED)

    [entry] = AddressSuppression.objects.all()
    assert (entry.channel, entry.address) == ("email", "bounce@example.com")
    assert "550" in entry.evidence and "no such user" in entry.evidence

    later = order_email(person)
    assert (later.status, later.reason) == (DeliveryStatus.SUPPRESSED, Reason.ADDRESS_SUPPRESSED)
    assert later.enqueued_at is None and later.finished_at is not None
    assert sent(later).attempts == 0  # the sender does not pick it up either
    assert mail.received == []

    # The person fixes their address: the new one is reached at once.
    person.email = "b1@example.com"
    person.save()
    fixed = sent(order_email(person))
    assert fixed.status == DeliveryStatus.DELIVERED
    assert [m.rcpt_tos for m in mail.received] == [["b1@example.com"]]


@pytest.mark.parametrize(
    ("rcpt", "data"),
    [("450 4.2.1 mailbox busy", None), (None, "554 5.7.1 message rejected as spam")],
)
def test_a_soft_bounce_or_a_refused_message_does_not_suppress_the_address(person, mail, rcpt, data):
    if rcpt:
        mail.handler.rcpt_answers.append(rcpt)
    if data:
        mail.handler.data_answers.append(data)
    sent(order_email(person))

    assert not AddressSuppression.objects.exists()
    assert order_email(person).status == DeliveryStatus.QUEUED


def test_support_lifts_a_suppression_by_deleting_it_in_admin(person, mail, client):
    entry = AddressSuppression.objects.create(
        channel="email", address="bounce@example.com", evidence="550 5.1.1 no such user"
    )
    user = User.objects.create_user("sam", "sam@example.com", "pw", is_staff=True)
    user.groups.add(support_group_ensure(), redrive_group_ensure())
    client.force_login(user)

    listing = client.get("/admin/deliveries/addresssuppression/", {"q": "bounce@"})
    assert list(listing.context["cl"].result_list) == [entry]
    response = client.post(
        f"/admin/deliveries/addresssuppression/{entry.pk}/delete/", {"post": "yes"}
    )
    assert response.status_code == 302

    assert not AddressSuppression.objects.exists()
    assert sent(order_email(person)).status == DeliveryStatus.DELIVERED
