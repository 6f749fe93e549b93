"""A login code's email is sent by the thread that routed it, with no send message
between routing and sending; what that thread does not send goes through the broker as
before, and a worker lost in between loses nothing."""

from __future__ import annotations

import json
import uuid

import pytest
from kombu import Connection

from deliveries.models import Delivery
from deliveries.pipeline.enqueue import SEND_TASK
from deliveries.pipeline.routing import notifications_route, notifications_route_here
from notify.models import Category, Producer, Recipient
from notify.services import notification_accept
from tests.conftest import purge_queues


def login_code(user_id: str) -> str:
    """Accept a login code (email only, the `high` class) for `user_id`."""
    return str(
        notification_accept(
            producer=Producer.objects.get_or_create(name="send-at-route")[0],
            event_id=str(uuid.uuid4()),
            user_id=user_id,
            category=Category.objects.get(key="security.login_code"),
            payload={"code": "123456"},
            channels=["email"],
            ttl_seconds=None,
        ).notification_id
    )


def send_messages(broker: Connection, queue: str) -> list[list[int]]:
    """Take every message off `queue` and return the delivery ids of the send messages
    (route messages the session's relay may publish meanwhile are left out)."""
    channel = broker.default_channel
    sent = []
    while (message := channel.basic_get(queue=queue, no_ack=True)) is not None:
        if message.headers.get("task") == SEND_TASK:
            sent.append(json.loads(message.body)[0][0])  # args, kwargs, embed
    return sent


@pytest.fixture
def person(transactional_db, demo_data, broker, session_worker_paused):
    purge_queues(broker)
    Recipient.objects.create(user_id="route-here", email="here@example.com", locale="en")
    yield "route-here"
    purge_queues(broker)


def test_a_high_worker_keeps_a_login_code_email_to_send_and_publishes_nothing(person, broker):
    notification_id = login_code(person)
    routed = notifications_route_here(notification_ids=[notification_id], queue="high")
    email = Delivery.objects.get(notification_id=notification_id, channel="email")
    assert routed.here == {"email": [email.pk]}
    assert routed.started == [email.pk]
    assert send_messages(broker, "high") == []
    assert email.status == "queued"


def test_a_worker_of_another_class_publishes_the_send_message_as_before(person, broker):
    notification_id = login_code(person)
    routed = notifications_route_here(notification_ids=[notification_id], queue="medium")
    email = Delivery.objects.get(notification_id=notification_id, channel="email")
    assert routed.here == {}
    assert send_messages(broker, "high") == [[email.pk]]


def test_a_worker_lost_before_sending_what_it_kept_leaves_it_to_the_route_run_again(person, broker):
    """Its route message was never acknowledged, so the broker gives it to another
    worker, whose route finds the email still queued and starts it."""
    notification_id = login_code(person)
    notifications_route_here(notification_ids=[notification_id], queue="high")  # then lost
    email = Delivery.objects.get(notification_id=notification_id, channel="email")
    assert notifications_route(notification_ids=[notification_id]) == [email.pk]
    assert send_messages(broker, "high") == [[email.pk]]


def test_a_batch_of_several_emails_goes_to_the_senders_by_message(person, broker):
    """Sending a burst's batch in the routing thread would hold up the routing of what
    follows (and the order of each person's emails behind it): only a lone one stays."""
    Recipient.objects.create(user_id="route-here-2", email="here2@example.com", locale="en")
    ids = [login_code(person), login_code("route-here-2")]
    routed = notifications_route_here(notification_ids=ids, queue="high")
    emails = set(Delivery.objects.filter(notification_id__in=ids).values_list("pk", flat=True))
    assert routed.here == {}
    [message] = send_messages(broker, "high")
    assert set(message) == emails
