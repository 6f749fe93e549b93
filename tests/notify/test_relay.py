"""The outbox relay's round: what it publishes, what it marks, and when it looks again.

The round runs in this process against the real PostgreSQL and RabbitMQ (the route
messages are read back from the queue); the suite's own relay and worker are stopped
meanwhile, so every row is this test's to publish.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from deliveries.pipeline.enqueue import ROUTE_TASK
from notify.models import Notification, Outbox, Recipient
from notify.relay import outbox_publish_round
from scripts.ports import unused_port
from tests.conftest import ROOT, messages_taken, session_pipeline_stopped


@pytest.fixture
def quiet_pipeline(transactional_db, broker):
    """No relay publishes and no worker consumes but this test; `high` starts empty."""
    with session_pipeline_stopped():
        messages_taken("high")
        yield
        messages_taken("high")


def login_codes(api, people: list[str]) -> list[str]:
    """POST one login code (email) to each person; the notification ids, in that order."""
    ids = []
    for number, person in enumerate(people):
        Recipient.objects.get_or_create(user_id=person, defaults={"email": f"{person}@ex.com"})
        response = api.post(
            "/v1/notifications",
            {
                "event_id": f"relay-{person}-{number}",
                "user_id": person,
                "category": "security.login_code",
                "channels": ["email"],
                "payload": {"code": f"{number:06d}"},
            },
            format="json",
        )
        assert response.status_code == 202, response.content
        ids.append(str(Notification.objects.get(event_id=f"relay-{person}-{number}").pk))
    return ids


def test_a_round_publishes_a_class_marks_it_and_says_whether_rows_are_left(
    quiet_pipeline, api, settings
):
    """Every due row of `high` goes out in one route message, each person's in order,
    and is marked published once; a round that took fewer rows than its limit says none
    is left (the relay then waits for the next wake-up instead of asking again), one
    that filled its limit says look again."""
    ids = login_codes(api, ["r-b", "r-a", "r-b"])

    result = outbox_publish_round(queues=("high",))

    assert (result.published, result.more) == (3, False)
    [(task, [routed], _)] = messages_taken("high")
    assert task == ROUTE_TASK
    # Person by person (r-b was registered first), each person's in due order.
    assert routed == [ids[0], ids[2], ids[1]]
    rows = Outbox.objects.filter(notification_id__in=ids)
    assert {(row.publish_attempts, row.published_at is not None) for row in rows} == {(1, True)}

    settings.NOTIFY_OUTBOX_BATCH = 2
    more_ids = login_codes(api, ["r-c", "r-d", "r-e"])
    first = outbox_publish_round(queues=("high",))
    second = outbox_publish_round(queues=("high",))
    assert (first.published, first.more) == (2, True)
    assert (second.published, second.more) == (1, False)
    published = [
        notification for _, [routed], _ in messages_taken("high") for notification in routed
    ]
    assert sorted(published) == sorted(more_ids)


def test_rows_the_broker_never_took_stay_unpublished_and_uncounted(quiet_pipeline, api, worker_env):
    """A relay whose broker does not answer publishes nothing: the rows it locked and
    marked in its statement are unmarked before it commits (no publish counted), so the
    next round, with the broker back, publishes them once."""
    ids = login_codes(api, ["down-a", "down-b"])
    closed = unused_port()  # nothing listens there
    env = {**worker_env, "CELERY_BROKER_URL": f"amqp://guest:guest@127.0.0.1:{closed}//"}
    script = (
        "import django; django.setup()\n"
        "from notify.relay import outbox_publish_round\n"
        "print(outbox_publish_round(queues=('high',)).published)\n"
    )
    ran = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True, timeout=120
    )
    assert ran.returncode == 0, ran.stderr.decode()[-2000:]
    assert ran.stdout.decode().split()[-1] == "0"
    rows = Outbox.objects.filter(notification_id__in=ids)
    assert {(row.publish_attempts, row.published_at) for row in rows} == {(0, None)}

    assert outbox_publish_round(queues=("high",)).published == 2
    [(_, [routed], _)] = messages_taken("high")
    assert sorted(routed) == sorted(ids)
    rows = Outbox.objects.filter(notification_id__in=ids)
    assert {row.publish_attempts for row in rows} == {1}
