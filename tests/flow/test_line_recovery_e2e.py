"""Nothing waits in a worker's memory where a kill can strand it: login codes waiting in
a worker's email line (their broker messages already acknowledged) are sent by another
worker within seconds of `kill -9`, each exactly once."""

from __future__ import annotations

import time
from collections import Counter

import pytest

from deliveries.models import Delivery, DeliveryStatus
from notify.models import Recipient
from tests.waiting import wait_for

pytestmark = pytest.mark.e2e

WAITING = 20  # login codes in the killed worker's line
RECOVERY_BOUND = 30.0  # seconds from the kill until every one was sent by another worker
HOLD = 20.0  # the SMTP peer's answer to DATA while the first code holds the one sender


def codes_post(api, user_ids: list[str]) -> None:
    events = [
        {
            "event_id": f"line-{user_id}",
            "user_id": user_id,
            "category": "security.login_code",
            "channels": ["email"],
            "payload": {"code": "123456"},
        }
        for user_id in user_ids
    ]
    response = api.post("/v1/notifications/batch", {"events": events}, format="json")
    assert response.status_code == 200, response.content
    assert {r["status"] for r in response.json()["results"]} == {202}


def waiting_in_memory(broker, user_ids: list[str]) -> bool:
    """One code is being sent, every other one is routed and published, and none is left
    at the broker: they wait in the worker's line, their messages acknowledged."""
    emails = Delivery.objects.filter(notification__recipient__user_id__in=user_ids, channel="email")
    if emails.filter(status=DeliveryStatus.SENDING).count() != 1:
        return False
    queued = emails.filter(status=DeliveryStatus.QUEUED, enqueued_at__isnull=False).count()
    if queued != WAITING:
        return False
    _, ready, _ = broker.default_channel.queue_declare(queue="high", passive=True)
    return ready == 0


def test_sends_waiting_in_a_killed_workers_line_are_sent_by_another_within_seconds_once(
    api, pipeline, broker, workers_with
):
    smtp = pipeline
    user_ids = [f"line-{i:02d}" for i in range(WAITING + 1)]
    Recipient.objects.bulk_create(
        Recipient(user_id=u, email=f"{u}@example.com", locale="en") for u in user_ids
    )
    smtp.handler.data_delay = HOLD
    (doomed,) = workers_with(
        pool="threads",
        concurrency=8,
        queues="high",
        # One email sender, never counted slow, and a line long enough for all of them:
        # the first code holds the sender on the peer's slow DATA, the others wait.
        NOTIFY_EMAIL_SENDERS="1",
        NOTIFY_CHANNEL_SLOW_SECONDS="600",
        NOTIFY_CHANNEL_WAIT_MAX="3600",
        # Each code its own send message, as codes arriving one by one have.
        NOTIFY_BATCH_SIZE_TRANSACTIONAL="1",
    )
    codes_post(api, user_ids)
    wait_for(
        lambda: waiting_in_memory(broker, user_ids),
        timeout=HOLD / 2,
        what=f"{WAITING} codes waiting in the worker's line, none at the broker",
    )
    stranded = set(
        Delivery.objects.filter(
            notification__recipient__user_id__in=user_ids, status=DeliveryStatus.QUEUED
        ).values_list("notification__recipient__email", flat=True)
    )
    doomed.process.kill()
    doomed.process.wait()
    killed_at = time.monotonic()
    smtp.handler.data_delay = 0.0
    workers_with(pool="threads", concurrency=8, queues="high")

    def all_sent() -> bool:
        return stranded <= {mail.rcpt_tos[0] for mail in smtp.received}

    wait_for(all_sent, timeout=RECOVERY_BOUND, what="the stranded codes sent by another worker")
    took = time.monotonic() - killed_at
    time.sleep(2.0)  # a second copy, were one coming, would arrive by now
    counts = Counter(mail.rcpt_tos[0] for mail in smtp.received if mail.rcpt_tos[0] in stranded)
    assert set(counts.values()) == {1}, counts
    print(f"recovered in {took:.1f} s")
    assert took < RECOVERY_BOUND
