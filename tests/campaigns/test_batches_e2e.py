"""A worker killed with SIGKILL in the middle of a campaign's send batch: the batch's
message comes back to another worker, and every member is emailed exactly once."""

from __future__ import annotations

import os
import signal
import time
from collections import Counter

import pytest

from deliveries.models import Delivery
from deliveries.pipeline.sweep import sweep_due_deliveries
from tests.campaigns.conftest import fan_out_all, launch, seed_recipients
from tests.waiting import wait_for

pytestmark = pytest.mark.e2e


def test_a_worker_killed_mid_send_batch_emails_every_member_exactly_once(
    promo_data, pipeline, workers_with, settings
):
    smtp = pipeline
    audience = 40
    seed_recipients(audience, prefix="kb")
    # A relay that takes 0.2 s to answer each message: the kill below lands while one is
    # unanswered (the relay then drops it, as a real one does when its client goes).
    smtp.handler.data_delay = 0.2
    [first] = workers_with(queues="low", pool="threads", concurrency=2)
    campaign = launch("promo.weekly")  # in-app and email (Web Push: no device)
    fan_out_all(campaign)  # the relay publishes its routes; the worker routes and sends

    wait_for(lambda: len(smtp.received) >= 12, timeout=60, what="a third of the batch emailed")
    # The kill lands while the relay holds a message's DATA, well before its answer. A
    # kill at the moment of an answer is the window no sender can close (the relay took
    # the message, the sender never heard): a fixed sleep after an arrival, overslept on
    # a loaded box, landed there and sent that message twice.
    held = smtp.handler.data_started
    deadline = time.monotonic() + 10
    while not (len(held) > len(smtp.received) and time.time() - held[-1] < 0.05):
        assert time.monotonic() < deadline, "no DATA held by the relay"
        time.sleep(0.002)
    os.kill(first.process.pid, signal.SIGKILL)
    first.process.wait(timeout=10)
    killed_at = len(smtp.received)
    assert killed_at < audience, "the batch ended before the kill"

    # The batch's message comes back to a new worker, which sends what was not claimed;
    # the claims the killed worker held are settled or given back by the sweeper.
    [second] = workers_with(queues="low", pool="threads", concurrency=2)[-1:]
    wait_for(lambda: len(smtp.received) > killed_at, timeout=30, what="the batch going on")
    second.wait_idle(timeout=60)  # done with the batch: what is left is the killed claims
    # The sweeper's claim timeout, shortened here (this process runs the sweep): only
    # the killed worker's claim is left by now.
    settings.NOTIFY_SEND_CLAIM_TIMEOUT = 1.0
    time.sleep(1.1)
    sweep_due_deliveries()  # gives the stale claim back
    time.sleep(settings.NOTIFY_RETRY_SWEEP_GRACE + 0.1)
    sweep_due_deliveries()  # and publishes it again
    wait_for(lambda: len(smtp.received) >= audience, timeout=60, what="every member emailed")
    time.sleep(0.5)  # a duplicate would arrive now

    emailed = Counter(address for mail in smtp.received for address in mail.rcpt_tos)
    assert len(emailed) == audience
    assert set(emailed.values()) == {1}, emailed.most_common(3)
    statuses = set(Delivery.objects.filter(channel="email").values_list("status", flat=True))
    assert statuses == {"delivered"}
