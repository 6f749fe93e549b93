"""Dead letters tell the truth: the consumer process moves each dead-lettered message into
a table shown in admin, the queue stays empty, a re-drive runs the task again, and the
gauge counts what is still open."""

from __future__ import annotations

import subprocess
import sys

import kombu
import pytest
from django.contrib.auth.models import User
from django.test import Client

from deliveries.models import DeadLetter, Delivery, DeliveryRedrive
from deliveries.pipeline.dead_letters import dead_letters_drain
from notify.broker import queue_depth
from notify.models import Category, Notification
from notify.roles import redrive_group_ensure, support_group_ensure
from tests.conftest import purge_queues, reset_provider_state
from tests.deliveries.pipeline.test_route_recovery import route_that_raises_published
from tests.processes import ARTIFACTS, ROOT, stop_child
from tests.waiting import wait_for

pytestmark = pytest.mark.e2e


@pytest.fixture
def dead_letter_consumer(worker_env):
    """`manage.py dead_letter_consumer`, the Procfile's `dead-letters`, as a child process."""
    ARTIFACTS.mkdir(exist_ok=True)
    with open(ARTIFACTS / "dead-letters.log", "ab") as log:
        process = subprocess.Popen(
            [sys.executable, "manage.py", "dead_letter_consumer"],
            cwd=ROOT,
            env=worker_env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    yield process
    stop_child(process)
    assert process.returncode == 0, "the consumer did not stop cleanly on SIGTERM"


def redrive_in_admin(client: Client, row: DeadLetter) -> None:
    response = client.post(
        "/admin/deliveries/deadletter/",
        {"action": "redrive", "_selected_action": [row.pk]},
        follow=True,
    )
    assert response.status_code == 200
    assert "Re-driven: 1." in response.content.decode()


def listed(client: Client, state: str) -> list[int]:
    response = client.get(f"/admin/deliveries/deadletter/?state={state}")
    assert response.status_code == 200
    return [row.pk for row in response.context["cl"].result_list]


def test_a_dead_lettered_route_lands_in_the_table_and_a_redrive_from_admin_routes_it(
    pipeline, broker, dead_letter_consumer, scrape
):
    notification_id = route_that_raises_published("dl")

    # (Filtered: a retry an earlier test left in the shared worker may die meanwhile.)
    mine = DeadLetter.objects.filter(task="deliveries.route", arguments__args=[notification_id])
    row = wait_for(lambda: mine.first(), timeout=30, what="the dead letter row")
    assert row.task == "deliveries.route"
    assert row.arguments == {"args": [notification_id], "kwargs": {}}
    assert (row.reason, row.queue, row.routing_key, row.count) == (
        "rejected",
        "medium",
        "medium",
        1,
    )
    assert row.death_headers[0]["reason"] == "rejected"
    assert row.death_headers[0]["queue"] == "medium"
    assert row.first_seen_at == row.last_seen_at and row.redriven_at is None
    assert queue_depth("dead_letter") == 0  # moved, not left in the queue
    assert scrape().value("notify_dead_letters_open") == open_letters() >= 1

    staff = User.objects.create_user("ops", "ops@example.com", "pw", is_staff=True)
    staff.groups.add(support_group_ensure(), redrive_group_ensure())
    client = Client()
    client.force_login(staff)
    assert listed(client, "open") == [row.pk]

    # Re-driven before the cause is fixed: it dies again and the same row counts it.
    redrive_in_admin(client, row)
    again = wait_for(
        lambda: DeadLetter.objects.filter(pk=row.pk, count=2, redriven_at__isnull=True).first(),
        timeout=30,
        what="the same message dead-lettered again",
    )
    assert again.first_seen_at == row.first_seen_at < again.last_seen_at
    assert mine.count() == 1

    # Fixed: the re-drive runs the task again, and this time it routes the notification.
    Category.objects.filter(key="broken.dl").update(default_channels=["inapp"])
    redrive_in_admin(client, again)
    wait_for(
        lambda: Notification.objects.filter(pk=notification_id, routed_at__isnull=False).exists(),
        timeout=30,
        what="the re-driven route to run",
    )
    done = DeadLetter.objects.get(pk=row.pk)
    assert done.redriven_by == staff and done.redriven_at is not None
    assert row.pk not in listed(client, "open") and row.pk in listed(client, "redriven")
    assert scrape().value("notify_dead_letters_open") == open_letters()
    # A letter that died elsewhere just now (a retry an earlier test left in the shared
    # worker) is moved by the consumer within moments: nothing stays in the queue.
    wait_for(lambda: queue_depth("dead_letter") == 0, timeout=10, what="an empty dead-letter queue")


def open_letters() -> int:
    return DeadLetter.objects.filter(redriven_at__isnull=True).count()


def test_someone_without_the_redrive_permission_cannot_redrive(db, client):
    from django.utils import timezone

    row = DeadLetter.objects.create(
        message_id="m-1",
        task="deliveries.send",
        reason="rejected",
        queue="medium",
        routing_key="medium",
        body="[[1], {}, {}]",
        content_type="application/json",
        content_encoding="utf-8",
        first_seen_at=timezone.now(),
        last_seen_at=timezone.now(),
    )
    staff = User.objects.create_user("viewer", "v@example.com", "pw", is_staff=True)
    staff.groups.add(support_group_ensure())
    client.force_login(staff)
    assert listed(client, "open") == [row.pk]  # support sees it

    client.post(
        "/admin/deliveries/deadletter/", {"action": "redrive", "_selected_action": [row.pk]}
    )
    row.refresh_from_db()
    assert row.redriven_at is None


def email_event(api, user_id: str) -> str:
    """An email to a new recipient; returns the notification id."""
    api.put(f"/v1/users/{user_id}", {"email": f"{user_id}@example.com"}, format="json")
    event = {
        "event_id": f"dl-{user_id}",
        "user_id": user_id,
        "category": "order.shipped",
        "channels": ["email"],
        "payload": {"order_number": "D-1", "delivery_date": "2026-12-03", "items_count": 1},
    }
    return api.post("/v1/notifications", event, format="json").json()["notification_id"]


def died(notification_id: str) -> Delivery:
    return wait_for(
        lambda: Delivery.objects.filter(notification_id=notification_id, status="dead").first(),
        timeout=30,
        what=f"the email of {notification_id} to die",
    )


def test_a_dead_send_is_redriven_as_its_delivery_from_either_admin_page(
    api, pipeline, dead_letter_consumer, scrape, quick_email_retries
):
    smtp = pipeline
    smtp.handler.default_data_answer = "451 4.4.1 Relay busy"  # every try, until fixed
    first = died(email_event(api, "dl-a"))
    reset_provider_state()  # two dying emails in a row would open the SMTP breaker
    second = died(email_event(api, "dl-b"))

    def both_letters() -> list[DeadLetter] | None:
        rows = list(
            DeadLetter.objects.filter(
                task="deliveries.send", arguments__args__0__in=[first.pk, second.pk]
            )
        )
        return rows if len(rows) == 2 else None

    letters = wait_for(both_letters, timeout=30, what="both sends in the dead-letter table")
    letter_of = {row.arguments["args"][0]: row for row in letters}
    assert set(letter_of) == {first.pk, second.pk}
    assert scrape().value("notify_dead_letters_open") == open_letters() >= 2

    staff = User.objects.create_user("ops", "ops@example.com", "pw", is_staff=True)
    staff.groups.add(support_group_ensure(), redrive_group_ensure())
    client = Client()
    client.force_login(staff)
    smtp.handler.default_data_answer = "250 OK"  # the relay is fixed

    # From the dead letters: the delivery is re-driven (its message alone would be refused).
    redrive_in_admin(client, letter_of[first.pk])
    # From the deliveries: its dead letter is closed with it.
    response = client.post(
        "/admin/deliveries/delivery/",
        {"action": "redrive", "_selected_action": [second.pk]},
        follow=True,
    )
    assert "Re-driven: 1." in response.content.decode()

    for delivery in (first, second):
        wait_for(
            lambda d=delivery: Delivery.objects.get(pk=d.pk).status == "delivered",
            timeout=30,
            what=f"the re-driven delivery {delivery.pk} delivered",
        )
        assert DeliveryRedrive.objects.get(delivery_id=delivery.pk).by == staff
    assert sorted(m.rcpt_tos[0] for m in smtp.received) == ["dl-a@example.com", "dl-b@example.com"]
    assert not {row.pk for row in letters} & set(listed(client, "open"))
    assert scrape().value("notify_dead_letters_open") == open_letters()
    assert queue_depth("dead_letter") == 0


def test_the_same_failing_route_republished_is_one_row_counted_twice(db, broker):
    purge_queues(broker)
    producer = kombu.Producer(broker.default_channel)
    dead = kombu.Queue("dead_letter", no_declare=True)
    # The sweeper republishes an unrouted notification under a new task id; both die.
    for task_id in ("route-try-1", "route-try-2"):
        producer.publish(
            b'[["n-42"], {}, {"callbacks": null}]',
            routing_key="dead_letter",
            exchange="",
            headers={"id": task_id, "task": "deliveries.route"},
            content_type="application/json",
            content_encoding="utf-8",
            declare=[dead],
        )
    assert dead_letters_drain(connection=broker) == 2

    [row] = DeadLetter.objects.all()
    assert (row.message_id, row.count) == ("deliveries.route:n-42", 2)
    assert row.headers["id"] == "route-try-2"  # the latest message, for a re-drive
