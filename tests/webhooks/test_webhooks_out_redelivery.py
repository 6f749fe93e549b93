"""Status webhooks lose nothing: a receiver down past the whole retry schedule gets every
event once, in sequence per delivery, after a re-delivery; an endpoint disabled and
re-enabled gets what was written meanwhile; a disabled endpoint's backlog is bounded and
its drops are counted on /metrics. On real worker processes and a loopback receiver."""

from __future__ import annotations

import threading
import time
from collections import defaultdict
from datetime import timedelta

import pytest
from django.db import transaction
from django.test import Client
from django.utils import timezone
from django_redis import get_redis_connection
from prometheus_client.parser import text_string_to_metric_families
from standardwebhooks.webhooks import Webhook

from deliveries.models import Delivery
from tests.peers.webhooks import WebhookReceiver
from tests.waiting import wait_for
from tests.webhooks.test_webhooks_out import _other_producer_api, register, send_inapp
from webhooks.backlog import BACKLOG_DROPS_KEY
from webhooks.events import webhook_events_write
from webhooks.models import WebhookEndpoint, WebhookEvent, WebhookEventStatus
from webhooks.posting import webhook_events_sweep

TYPES = ["delivery.delivered", "delivery.opened", "delivery.clicked"]
# A whole retry schedule of three tries in well under a second.
SHORT_SCHEDULE = {"NOTIFY_WEBHOOK_RETRY_DELAYS": "0.1,0.2"}
COUNT = 20  # notifications; three events each


def provider_news_written(count: int) -> list[Delivery]:
    """Once the `count` deliveries' `delivery.delivered` events are written, the email
    provider's news about each (opened, then clicked), written as provider_events does:
    each its own round, so each event takes its delivery's next sequence number."""
    wait_for(
        lambda: WebhookEvent.objects.filter(event_type="delivery.delivered").count() >= count,
        what="the delivered events",
    )
    deliveries = list(Delivery.objects.filter(channel="inapp"))
    assert len(deliveries) == count
    for kind in ("delivery.opened", "delivery.clicked"):
        for delivery in deliveries:
            with transaction.atomic():
                webhook_events_write(news=[(delivery.pk, delivery.accepted_at, kind)])
    return deliveries


def arrivals_by_delivery(peer: WebhookReceiver, secret: str) -> dict[int, list[tuple[int, str]]]:
    """Each delivery's accepted posts in arrival order: (sequence, type); every post's
    signature verified and its `webhook-sequence` header the body's."""
    verifier = Webhook(secret)
    seen: dict[int, list[tuple[int, str]]] = defaultdict(list)
    for headers, body in peer.accepted():
        lowered = {k.lower(): v for k, v in headers.items()}
        payload = verifier.verify(body, lowered)
        data = payload["data"]
        assert lowered["webhook-sequence"] == str(data["sequence"])
        seen[data["delivery_id"]].append((data["sequence"], payload["type"]))
    return seen


def assert_each_once_in_sequence(
    peer: WebhookReceiver, secret: str, deliveries: list[Delivery]
) -> None:
    accepted = peer.accepted()
    ids = [h["webhook-id"] for h, _ in accepted]
    assert len(ids) == len(set(ids)) == 3 * len(deliveries)  # each event once
    seen = arrivals_by_delivery(peer, secret)
    assert set(seen) == {d.pk for d in deliveries}
    for arrived in seen.values():
        assert arrived == [(1, TYPES[0]), (2, TYPES[1]), (3, TYPES[2])]


def test_a_receiver_down_past_the_schedule_gets_every_event_once_in_sequence_when_redelivered(
    api, pipeline, workers_with, receiver
):
    created = register(api, receiver.url, TYPES).json()
    receiver.answer = 503  # down for the whole test's schedule
    workers_with(**SHORT_SCHEDULE)
    since = timezone.now() - timedelta(seconds=1)
    send_inapp(api, "rd", COUNT)
    deliveries = provider_news_written(COUNT)

    wait_for(
        lambda: WebhookEvent.objects.filter(status=WebhookEventStatus.FAILED).count() == 3 * COUNT,
        timeout=60,
        what="every event failed, its schedule spent",
    )
    assert receiver.received and not receiver.accepted()
    time.sleep(0.5)
    tried = len(receiver.received)
    time.sleep(1)
    assert len(receiver.received) == tried  # failed: nothing more is tried by itself

    receiver.answer = 204
    answer = api.post(
        f"/v1/webhooks/{created['id']}/redeliver",
        {"since": since.isoformat(), "until": timezone.now().isoformat()},
        format="json",
    )
    assert answer.status_code == 202, answer.content
    assert answer.json() == {"queued": 3 * COUNT, "more": False}
    wait_for(lambda: len(receiver.accepted()) >= 3 * COUNT, timeout=60, what="the re-delivery")
    time.sleep(0.5)  # nothing more arrives: no duplicates
    assert_each_once_in_sequence(receiver, created["secret"], deliveries)
    assert WebhookEvent.objects.filter(status=WebhookEventStatus.DELIVERED).count() == 3 * COUNT


def test_an_endpoint_disabled_and_re_enabled_gets_what_was_written_meanwhile_in_sequence(
    api, pipeline, workers_with, receiver
):
    created = register(api, receiver.url, TYPES).json()
    WebhookEndpoint.objects.update(active=False, disabled_reason="kept failing")
    workers_with()
    send_inapp(api, "off", COUNT)
    deliveries = provider_news_written(COUNT)
    written = WebhookEvent.objects.filter(status=WebhookEventStatus.PENDING)
    assert written.count() == 3 * COUNT  # written while disabled
    time.sleep(1)
    assert not receiver.received  # and nothing posted

    enabled = api.post(f"/v1/webhooks/{created['id']}/enable")
    assert enabled.status_code == 200 and enabled.json()["active"] is True
    wait_for(lambda: len(receiver.accepted()) >= 3 * COUNT, timeout=60, what="what waited")
    time.sleep(0.5)
    assert_each_once_in_sequence(receiver, created["secret"], deliveries)


def test_a_disabled_endpoints_backlog_keeps_its_newest_and_counts_the_drops(api, settings):
    settings.NOTIFY_WEBHOOK_DISABLED_BACKLOG_MAX = 3
    register(api, "https://hooks.example/off", ["delivery.delivered"])
    endpoint = WebhookEndpoint.objects.get()
    WebhookEndpoint.objects.update(active=False)
    redis = get_redis_connection("default")
    redis.delete(BACKLOG_DROPS_KEY)
    now = timezone.now()
    ancient = now - timedelta(days=settings.NOTIFY_RETENTION_DAYS + 1)
    for number in range(6):
        WebhookEvent.objects.create(
            endpoint=endpoint,
            msg_id=f"msg_{number}",
            event_type="delivery.delivered",
            payload={},
            next_attempt_at=now,
            created_at=ancient if number == 5 else now,
        )

    webhook_events_sweep(now=now)

    # The oldest three go over the bound; the newest, older than retention, goes too.
    left = set(WebhookEvent.objects.values_list("msg_id", flat=True))
    assert left == {"msg_3", "msg_4"}
    metrics = Client().get("/metrics").content.decode()
    drops = {
        sample.labels["endpoint"]: sample.value
        for family in text_string_to_metric_families(metrics)
        for sample in family.samples
        if sample.name == "notify_webhook_backlog_dropped_total"
    }
    assert drops == {str(endpoint.pk): 4.0}
    # An enabled endpoint's pending events are never trimmed.
    WebhookEndpoint.objects.update(active=True)
    for number in range(6, 12):
        WebhookEvent.objects.create(
            endpoint=endpoint,
            msg_id=f"msg_{number}",
            event_type="delivery.delivered",
            payload={},
            next_attempt_at=now + timedelta(hours=1),
            created_at=now,
        )
    webhook_events_sweep(now=now)
    assert WebhookEvent.objects.count() == 8
    redis.delete(BACKLOG_DROPS_KEY)


def _failed_event(endpoint: WebhookEndpoint, msg_id: str, created_at) -> WebhookEvent:
    return WebhookEvent.objects.create(
        endpoint=endpoint,
        msg_id=msg_id,
        event_type="delivery.delivered",
        payload={},
        status=WebhookEventStatus.FAILED,
        attempts=3,
        next_attempt_at=created_at,
        created_at=created_at,
        finished_at=created_at,
    )


def test_redelivery_is_the_endpoint_owners_and_answers_how_many_were_queued(api):
    created = register(api, "https://hooks.example/r", ["delivery.delivered"]).json()
    endpoint = WebhookEndpoint.objects.get()
    now = timezone.now()
    for number in range(3):
        _failed_event(endpoint, f"msg_old{number}", now - timedelta(days=2))
    _failed_event(endpoint, "msg_new", now - timedelta(minutes=5))
    url = f"/v1/webhooks/{created['id']}/redeliver"

    other = _other_producer_api("elsewhere", scopes=["webhooks:write"])
    refused = other.post(url, {"since": (now - timedelta(days=3)).isoformat()}, format="json")
    assert refused.status_code == 404
    assert refused.json()["error"]["code"] == "not_found"
    narrow = _other_producer_api("shop", scopes=["notifications:send"])
    assert narrow.post(url, {"event_ids": ["msg_new"]}, format="json").status_code == 403
    neither = api.post(url, {"until": now.isoformat()}, format="json")
    assert neither.status_code == 400 and neither.json()["error"]["field"] == "since"
    assert WebhookEvent.objects.filter(status=WebhookEventStatus.FAILED).count() == 4

    by_id = api.post(url, {"event_ids": ["msg_new", "msg_unknown"]}, format="json")
    assert by_id.status_code == 202 and by_id.json() == {"queued": 1, "more": False}
    again = api.post(url, {"event_ids": ["msg_new"]}, format="json")
    assert again.json() == {"queued": 0, "more": False}  # no longer failed
    by_time = api.post(
        url,
        {
            "since": (now - timedelta(days=3)).isoformat(),
            "until": (now - timedelta(days=1)).isoformat(),
        },
        format="json",
    )
    assert by_time.json() == {"queued": 3, "more": False}
    queued = WebhookEvent.objects.get(msg_id="msg_old0")
    assert queued.status == WebhookEventStatus.PENDING and queued.finished_at is None
    assert queued.attempts_before_redrive == 3  # the whole schedule again

    WebhookEndpoint.objects.update(active=False)
    disabled = api.post(url, {"event_ids": ["msg_new"]}, format="json")
    assert disabled.status_code == 409
    assert disabled.json()["error"]["code"] == "endpoint_disabled"


def test_a_redelivery_queues_at_most_its_bound_and_says_more_are_left(api, settings):
    settings.NOTIFY_WEBHOOK_REDELIVER_MAX = 2
    created = register(api, "https://hooks.example/m", ["delivery.delivered"]).json()
    endpoint = WebhookEndpoint.objects.get()
    now = timezone.now()
    for number in range(3):
        _failed_event(endpoint, f"msg_{number}", now - timedelta(minutes=10 - number))
    url = f"/v1/webhooks/{created['id']}/redeliver"
    since = (now - timedelta(hours=1)).isoformat()
    assert api.post(url, {"since": since}, format="json").json() == {"queued": 2, "more": True}
    assert WebhookEvent.objects.get(msg_id="msg_2").status == WebhookEventStatus.FAILED
    assert api.post(url, {"since": since}, format="json").json() == {"queued": 1, "more": False}


def test_admin_redelivers_failed_events_of_an_endpoint_and_of_a_selection(api, admin_client):
    register(api, "https://hooks.example/a", ["delivery.delivered"])
    endpoint = WebhookEndpoint.objects.get()
    now = timezone.now()
    for number in range(3):
        _failed_event(endpoint, f"msg_{number}", now)
    picked = WebhookEvent.objects.get(msg_id="msg_0")
    answer = admin_client.post(
        "/admin/webhooks/webhookevent/",
        {"action": "redeliver", "_selected_action": [picked.pk]},
        follow=True,
    )
    assert "1 failed event(s) queued" in answer.content.decode()
    assert WebhookEvent.objects.filter(status=WebhookEventStatus.FAILED).count() == 2
    answer = admin_client.post(
        "/admin/webhooks/webhookendpoint/",
        {"action": "redeliver", "_selected_action": [endpoint.pk]},
        follow=True,
    )
    assert "2 failed event(s) queued" in answer.content.decode()
    assert not WebhookEvent.objects.filter(status=WebhookEventStatus.FAILED).exists()


def test_staff_who_may_only_view_webhooks_cannot_redeliver_or_enable(api, client):
    from django.contrib.auth.models import Permission, User

    register(api, "https://hooks.example/v", ["delivery.delivered"])
    endpoint = WebhookEndpoint.objects.get()
    _failed_event(endpoint, "msg_v", timezone.now())
    viewer = User.objects.create_user("viewer", "viewer@example.com", "pw", is_staff=True)
    viewer.user_permissions.set(
        Permission.objects.filter(codename__in=["view_webhookendpoint", "view_webhookevent"])
    )
    client.force_login(viewer)
    for path, pk, action in (
        ("/admin/webhooks/webhookendpoint/", endpoint.pk, "redeliver"),
        ("/admin/webhooks/webhookendpoint/", endpoint.pk, "enable"),
        ("/admin/webhooks/webhookevent/", WebhookEvent.objects.get().pk, "redeliver"),
    ):
        client.post(path, {"action": action, "_selected_action": [pk]}, follow=True)
    assert WebhookEvent.objects.get().status == WebhookEventStatus.FAILED


@pytest.mark.django_db(transaction=True)
def test_two_rounds_about_one_delivery_number_its_events_in_commit_order(demo_data):
    """The sequence is raised in the statement that writes the events, under the
    delivery's row lock: a round that writes while another holds the delivery waits for
    it, and numbers after it."""
    from django.db import connection

    from deliveries.pipeline.routing import notification_route
    from notify.models import Producer, Recipient
    from tests.webhooks.test_webhooks_out import _accepted

    endpoint = WebhookEndpoint.objects.create(
        producer=Producer.objects.get_or_create(name="shop")[0],
        url="https://hooks.example/c",
        secret="whsec_" + "A" * 32,
        active=False,  # nothing is posted: only the numbering is looked at
    )
    for kind in ("delivery.opened", "delivery.clicked"):
        endpoint.subscriptions.create(producer_id=endpoint.producer_id, event_type=kind)
    Recipient.objects.create(user_id="race", locale="en")
    notification_route(notification_id=_accepted("shop", "race", ["inapp"]).pk)
    delivery = Delivery.objects.get()
    first_holds = threading.Event()
    second_started = threading.Event()

    def first() -> None:
        try:
            with transaction.atomic():
                webhook_events_write(news=[(delivery.pk, delivery.accepted_at, "delivery.opened")])
                first_holds.set()
                second_started.wait(5)
                time.sleep(0.3)  # the second round waits on the delivery's row meanwhile
        finally:
            connection.close()

    def second() -> None:
        first_holds.wait(5)
        second_started.set()
        try:
            with transaction.atomic():
                webhook_events_write(news=[(delivery.pk, delivery.accepted_at, "delivery.clicked")])
        finally:
            connection.close()

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    numbered = dict(WebhookEvent.objects.values_list("event_type", "sequence"))
    assert numbered == {"delivery.opened": 1, "delivery.clicked": 2}
    assert Delivery.objects.get().webhook_sequence == 2
