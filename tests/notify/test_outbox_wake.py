"""Waking the relays: at the commit of an outbox insert, or right after it.

A campaign's fan-out commits thousands of outbox rows on a backend running at a low
priority; a NOTIFY sent by that commit would make every other NOTIFYing commit (a login
code's intake) wait for it. So the fan-out asks for the wake-up after its commit instead.
These tests listen on the relays' channel of the real PostgreSQL, with real commits.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import psycopg
import pytest
from django.db import connection, transaction

from campaigns.fanout import campaign_fan_out
from notify.models import Category, Outbox, Producer, Recipient
from notify.outbox_wake import outbox_wake_after_commit, wake_listener
from notify.services import notification_accept
from tests.conftest import purge_queues

QUIET = 0.5  # seconds a listener waits to be sure nothing more is coming


@pytest.fixture
def listener(transactional_db, demo_data) -> Iterator[psycopg.Connection]:
    """A connection LISTENing on the relays' channel: the relay's own kind."""
    with wake_listener() as conn:
        yield conn


def heard(listener: psycopg.Connection) -> int:
    """How many wake-ups arrive within QUIET seconds."""
    return sum(1 for _ in listener.notifies(timeout=QUIET))


def accept_one() -> str:
    """One login code accepted: a notification and its outbox row, in one transaction."""
    person = f"wake-{uuid.uuid4().hex[:8]}"
    Recipient.objects.create(user_id=person, email=f"{person}@example.com")
    return str(
        notification_accept(
            producer=Producer.objects.get_or_create(name="wake")[0],
            event_id=str(uuid.uuid4()),
            user_id=person,
            category=Category.objects.get(key="security.login_code"),
            payload={"code": "123456"},
            channels=["email"],
            ttl_seconds=None,
        ).notification_id
    )


def test_an_outbox_insert_wakes_the_relays_when_it_commits(listener):
    with transaction.atomic():
        accept_one()
        assert heard(listener) == 0  # delivered at the commit, not before
    assert heard(listener) == 1


def test_a_transaction_that_wakes_after_its_commit_sends_nothing_at_its_commit(listener):
    """The trigger stays silent in a transaction that set the setting, and the one
    wake-up comes from the call after the commit (a rolled-back one sends none)."""
    with transaction.atomic():
        connection.cursor().execute("SELECT set_config('notify.outbox_wake', 'after_commit', true)")
        accept_one()
    assert heard(listener) == 0
    assert Outbox.objects.count() == 1  # committed, and silent

    with transaction.atomic():
        outbox_wake_after_commit()
        accept_one()
        accept_one()
    assert heard(listener) == 1

    with pytest.raises(RuntimeError), transaction.atomic():
        outbox_wake_after_commit()
        accept_one()
        raise RuntimeError("rolled back")
    assert heard(listener) == 0
    # The setting was the transaction's own: the next plain insert wakes at its commit.
    accept_one()
    assert heard(listener) == 1


@pytest.fixture
def fan_out_here(broker, session_worker_paused):
    """No session worker takes the fan-out messages the launch and each batch publish
    (this test runs the batches itself), and none is left for a later test."""
    purge_queues(broker)
    yield
    purge_queues(broker)


def test_a_campaign_fan_out_batch_commits_silently_then_wakes_the_relays_once(
    listener, monkeypatch, fan_out_here
):
    """Each batch's commit sends no NOTIFY (what the listener had heard when the wake-up
    after it began), and the one after it does."""
    from notify import outbox_wake
    from tests.campaigns.conftest import campaign_notifications, launch, seed_recipients

    Recipient.objects.all().delete()  # the audience is exactly the people seeded here
    seed_recipients(30, prefix="wake")
    campaign = launch()
    heard(listener)  # whatever the launch itself woke
    at_commit: list[int] = []
    wake = outbox_wake.outbox_wake

    def wake_after_listening() -> None:
        at_commit.append(heard(listener))
        wake()

    monkeypatch.setattr(outbox_wake, "outbox_wake", wake_after_listening)

    first = campaign_fan_out(campaign_id=campaign.pk, batch_size=20)
    assert (first.created, first.more) == (20, True)
    assert heard(listener) == 1
    last = campaign_fan_out(campaign_id=campaign.pk, batch_size=20)
    assert (last.created, last.more) == (10, False)
    assert heard(listener) == 1
    assert at_commit == [0, 0]
    notifications = campaign_notifications(campaign)
    assert Outbox.objects.filter(notification__in=notifications).count() == 30


def test_a_wake_up_that_fails_after_the_commit_loses_nothing(listener, monkeypatch, caplog):
    """The rows are committed, the failure is logged, and the writer's own later
    callbacks still run (a fan-out's next batch is published by one)."""
    from notify import outbox_wake

    def wake_fails() -> None:
        raise RuntimeError("the database went away")

    monkeypatch.setattr(outbox_wake, "outbox_wake", wake_fails)
    later: list[str] = []
    with transaction.atomic():
        outbox_wake_after_commit()
        accept_one()
        transaction.on_commit(lambda: later.append("ran"))

    assert later == ["ran"]
    assert Outbox.objects.count() == 1
    assert "the database went away" in caplog.text
    assert heard(listener) == 0  # nobody woke them: the relays' poll finds the row
