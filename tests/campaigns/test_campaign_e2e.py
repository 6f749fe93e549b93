"""A campaign on the real services: the API answers at once, a real worker fans it out
batch after batch on `low`, the relay publishes the route tasks, and every member is
reached through the gate (in-app feed, email over the SMTP peer)."""

from __future__ import annotations

import os
import signal
import time
from collections import Counter

import pytest

from campaigns.models import Campaign
from notify.models import Notification
from tests.campaigns.conftest import campaign_body, seed_recipients
from tests.pressure.test_faults_e2e import pool_children
from tests.waiting import wait_for

pytestmark = pytest.mark.e2e


def test_a_launched_campaign_reaches_every_member_through_the_pipeline(
    api, promo_data, pipeline, workers_with
):
    smtp = pipeline
    workers_with(NOTIFY_CAMPAIGN_BATCH_SIZE="40", pool="threads", concurrency=8)
    seed_recipients(100)

    started = time.monotonic()
    response = api.post("/v1/campaigns", campaign_body(), format="json")
    assert response.status_code == 202, response.content
    assert time.monotonic() - started < 1.0
    campaign_id = response.json()["campaign_id"]

    def progress() -> dict | None:
        document = api.get(f"/v1/campaigns/{campaign_id}").json()
        reached = document["members"] == {"delivered": 100} and document["status"] == "done"
        return document if reached else None

    document = wait_for(progress, timeout=30, what="fanned out and every member reached")
    assert (document["audience_size"], document["created"]) == (100, 100)
    deliveries = {(d["status"], d["reason"]): d["count"] for d in document["deliveries"]}
    assert deliveries[("suppressed", "no_address")] == 100  # web push: no device
    wait_for(
        lambda: deliveries_delivered(api, campaign_id) == 200,
        timeout=30,
        what="in-app and email delivered to all",
    )
    wait_for(lambda: len(smtp.received) == 100, what="100 emails at the SMTP peer")
    assert Campaign.objects.get(pk=campaign_id).checkpoint > 0


def deliveries_delivered(api, campaign_id: int) -> int:
    document = api.get(f"/v1/campaigns/{campaign_id}").json()
    return sum(d["count"] for d in document["deliveries"] if d["status"] == "delivered")


def test_a_worker_killed_mid_fan_out_is_replaced_and_each_member_gets_one_notification(
    api, promo_data, pipeline, workers_with
):
    # Ten batches: the kill lands at the third or fourth (60 created), with most of the
    # fan-out still to do. Each batch after it costs the time its routes and sends take
    # (the fan-out yields to them), so a larger audience only lengthens the tail.
    audience = 200
    seed_recipients(audience, prefix="k")
    # Small batches: the fan-out yields to the routes of each batch, so it takes seconds.
    settings = {"NOTIFY_CAMPAIGN_BATCH_SIZE": "20"}
    [first] = workers_with(pool="prefork", concurrency=2, **settings)
    response = api.post("/v1/campaigns", campaign_body(name="Kill me"), format="json")
    assert response.status_code == 202, response.content
    campaign = Campaign.objects.get(pk=response.json()["campaign_id"])

    def under_way() -> bool:
        created = Campaign.objects.get(pk=campaign.pk).created_count
        return 60 <= created < audience

    wait_for(under_way, timeout=60, what="the fan-out to be under way")
    for pid in [*pool_children(first.process.pid), first.process.pid]:
        os.kill(pid, signal.SIGKILL)  # the whole worker, mid-fan-out
    first.process.wait(timeout=10)
    killed_at = Campaign.objects.get(pk=campaign.pk).created_count
    assert killed_at < audience

    workers_with(pool="prefork", concurrency=2, **settings)  # a fresh worker takes over
    wait_for(
        lambda: Campaign.objects.get(pk=campaign.pk).status == "done",
        timeout=120,
        what="the fan-out to finish after the kill",
    )
    made = Notification.objects.filter(event_id__startswith=f"campaign:{campaign.pk}:")
    per_member = Counter(made.values_list("recipient__user_id", flat=True))
    assert len(per_member) == audience  # nobody left out
    assert set(per_member.values()) == {1}  # nobody twice
    assert Campaign.objects.get(pk=campaign.pk).audience_size == audience
