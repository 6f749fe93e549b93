"""A stale claim (its sender lost mid-send) is given back a bounded number of times, and
never past its deadline: a send that keeps killing its worker ends dead, visibly."""

from __future__ import annotations

import time
from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.db.models import F
from django.utils import timezone
from kombu import Queue

from config.celery import app
from deliveries.models import AttemptOutcome, Delivery, DeliveryStatus, Reason
from deliveries.pipeline.redrive import deliveries_redrive
from deliveries.pipeline.sweep import sweep_due_deliveries
from tests.deliveries.pipeline.test_durability import (
    consumer_paused,
    delivered,
    routed_email_delivery,
)
from tests.waiting import wait_for

RECOVERIES_MAX = 3  # the default of NOTIFY_CLAIM_RECOVERIES_MAX


def claimed_by_a_worker_that_died(delivery: Delivery) -> None:
    """A sender claims the delivery (one more attempt) and is killed mid-send, long ago."""
    Delivery.objects.filter(pk=delivery.pk).update(
        status=DeliveryStatus.SENDING,
        claimed_at=timezone.now() - timedelta(hours=1),
        attempts=F("attempts") + 1,
    )


def dead_letters_in(broker, queue: str) -> list[list]:
    """The args of the dead-letter send messages waiting in `queue`."""
    found = []
    while message := Queue(queue, no_declare=True)(broker.default_channel).get(no_ack=True):
        args, kwargs, _ = message.decode()
        if kwargs.get("dead_letter"):
            found.append(args)
    return found


def test_a_delivery_whose_sender_keeps_dying_ends_dead_with_the_reason(
    api, broker, admin_client, session_worker_paused
):
    # Paused: a worker an earlier test started here would take the dead letter from medium.
    broker.default_channel.queue_purge("medium")
    delivery = routed_email_delivery(api, "poison-1")
    for recovery in range(1, RECOVERIES_MAX + 1):
        claimed_by_a_worker_that_died(delivery)
        sweep_due_deliveries()
        delivery.refresh_from_db()
        assert (delivery.status, delivery.claim_recoveries) == (DeliveryStatus.RETRYING, recovery)

    claimed_by_a_worker_that_died(delivery)  # once more than it may be given back
    sweep_due_deliveries()

    delivery.refresh_from_db()
    assert delivery.status == DeliveryStatus.DEAD
    assert delivery.reason == Reason.CLAIM_RECOVERED_TOO_OFTEN
    assert delivery.finished_at is not None
    [attempt] = delivery.attempt_log.all()
    assert attempt.number == RECOVERIES_MAX + 1
    assert attempt.outcome == AttemptOutcome.TRANSIENT
    assert attempt.status_code == "claim_lost"
    assert "worker was lost" in attempt.response
    assert dead_letters_in(broker, "medium") == [[delivery.pk]]
    sweep_due_deliveries()  # dead stays dead: nothing sends it again
    delivery.refresh_from_db()
    assert delivery.status == DeliveryStatus.DEAD

    # Support sees it among the dead, with the reason in words, and may re-drive it.
    dead_page = admin_client.get("/admin/deliveries/delivery/?status__exact=dead").content
    assert f"/admin/deliveries/delivery/{delivery.pk}/change/".encode() in dead_page
    assert Reason.CLAIM_RECOVERED_TOO_OFTEN.label.encode() in dead_page
    ops = User.objects.create_superuser("ops", "ops@example.com", "pw")
    assert deliveries_redrive(delivery_ids=[delivery.pk], by=ops) == 1
    delivery.refresh_from_db()
    assert (delivery.status, delivery.claim_recoveries) == (DeliveryStatus.QUEUED, 0)


def test_a_stale_claim_past_its_deadline_ends_expired_at_recovery(api, broker):
    delivery = routed_email_delivery(api, "late-1")
    Delivery.objects.filter(pk=delivery.pk).update(deadline=timezone.now() - timedelta(minutes=1))
    claimed_by_a_worker_that_died(delivery)

    sweep_due_deliveries()

    delivery.refresh_from_db()
    assert delivery.status == DeliveryStatus.EXPIRED
    assert delivery.reason == Reason.DEADLINE_PASSED
    assert delivery.claim_recoveries == 0  # not given back: nothing is sent late
    [attempt] = delivery.attempt_log.all()
    assert attempt.status_code == "claim_lost"


@pytest.mark.e2e
def test_an_ordinary_stale_claim_is_given_back_and_sent_once(api, pipeline, celery_worker):
    smtp = pipeline
    with consumer_paused(celery_worker, "medium"):
        delivery = routed_email_delivery(api, "lost-once")
        with app.connection_for_write() as conn:
            conn.default_channel.queue_purge("medium")
        claimed_by_a_worker_that_died(delivery)

    sweep_due_deliveries()  # gives the claim back
    sweep_due_deliveries(now=timezone.now() + timedelta(seconds=5))  # and republishes it

    wait_for(lambda: delivered(delivery), what="the recovered email delivered")
    time.sleep(1.0)  # room for a second send, were there one
    assert len(smtp.received) == 1
    assert (delivery.attempts, delivery.claim_recoveries) == (2, 1)
    assert delivery.reason == ""
