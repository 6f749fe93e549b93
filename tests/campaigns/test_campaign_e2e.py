"""A campaign on the real services: the API answers at once, a real worker fans it out
batch after batch on `low`, the relay publishes the route tasks, and every member is
reached through the gate (in-app feed, email over the SMTP peer)."""

from __future__ import annotations

import time

import pytest

from campaigns.models import Campaign
from tests.campaigns.conftest import PROMO, seed_recipients
from tests.waiting import wait_for

pytestmark = pytest.mark.e2e


def test_a_launched_campaign_reaches_every_member_through_the_pipeline(
    api, promo_data, pipeline, workers_with
):
    smtp = pipeline
    workers_with(NOTIFY_CAMPAIGN_BATCH_SIZE="40", pool="threads", concurrency=8)
    seed_recipients(100)

    started = time.monotonic()
    response = api.post(
        "/v1/campaigns",
        {"name": "Winter sale", "category": "promo.weekly", "payload": PROMO,
         "audience": {"all": True}},
        format="json",
    )  # fmt: skip
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
        lambda: deliveries_delivered(api, campaign_id) == 200, timeout=30,
        what="in-app and email delivered to all",
    )  # fmt: skip
    wait_for(lambda: len(smtp.received) == 100, what="100 emails at the SMTP peer")
    assert Campaign.objects.get(pk=campaign_id).checkpoint > 0


def deliveries_delivered(api, campaign_id: int) -> int:
    document = api.get(f"/v1/campaigns/{campaign_id}").json()
    return sum(d["count"] for d in document["deliveries"] if d["status"] == "delivered")
