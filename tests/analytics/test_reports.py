"""The reports, read from the store: a campaign's per channel, a producer's deliveries by
day, category, channel and provider; each producer sees only its own; an erased person
leaves the store while the counts stay; /metrics shows the lag and the backlog."""

from __future__ import annotations

from datetime import date, timedelta

import pytest
from django.test import Client
from django.utils import timezone
from rest_framework.test import APIClient

from analytics.events import person_hash
from analytics.store.schema import EVENTS
from analytics.store.shipper import batch_ship, erasures_apply
from campaigns.models import Campaign
from notify.api_keys import api_key_issue
from notify.models import Category, Recipient
from tests.analytics.conftest import queue_events


@pytest.fixture
def campaign(api, producer_key, demo_data):
    return Campaign.objects.create(
        name="Winter sale",
        producer=producer_key.api_key.producer,
        category=Category.objects.get(key="promo.weekly"),
        payload={},
        audience_kind="all",
        audience_spec={},
        launched_at=timezone.now(),
    )


def _campaign_events(producer_id: int, campaign_id: int) -> None:
    common = {"producer_id": producer_id, "campaign_id": campaign_id}
    queue_events(10, kind="accepted", **common)
    queue_events(3, kind="suppressed", reason="no_consent", **common)
    queue_events(2, kind="sent", **common)  # the failed tries: a delivered stands for its own
    queue_events(5, kind="delivered", latency_ms=200, **common)
    queue_events(2, kind="failed", reason="rejected", **common)
    queue_events(1, kind="opened", **common)
    queue_events(4, kind="accepted", channel="inapp", provider="inapp", **common)
    queue_events(4, kind="delivered", channel="inapp", provider="inapp", latency_ms=50, **common)


def test_a_campaign_report_counts_each_channel_and_only_for_its_producer(
    api, campaign, store, settings
):
    _campaign_events(campaign.producer_id, campaign.pk)
    _campaign_events(campaign.producer_id + 1000, campaign.pk)  # another producer's rows
    batch_ship(store=store)

    response = api.get(f"/v1/campaigns/{campaign.pk}/report")
    assert response.status_code == 200, response.content
    document = response.json()
    email = document["channels"]["email"]
    assert (email["audience"], email["suppressed"], email["sent"]) == (10, 3, 7)
    assert (email["delivered"], email["failed"], email["opened"]) == (5, 2, 1)
    assert email["suppressed_by_reason"] == {"no_consent": 3}
    assert email["failed_by_reason"] == {"rejected": 2}
    assert document["channels"]["inapp"]["delivered"] == 4
    assert document["lag_seconds"] == 0

    other = APIClient()
    other_key = api_key_issue(producer_name="other", scopes=["campaigns:write"]).key
    other.credentials(HTTP_AUTHORIZATION=f"Bearer {other_key}")
    assert other.get(f"/v1/campaigns/{campaign.pk}/report").status_code == 404


def test_a_deliveries_report_groups_and_shows_latency_only_of_the_callers_own(
    api, producer_key, store
):
    own = producer_key.api_key.producer_id
    queue_events(4, kind="delivered", producer_id=own, latency_ms=100)
    queue_events(2, kind="delivered", producer_id=own, channel="sms", provider="smpp")
    queue_events(1, kind="failed", producer_id=own, reason="rejected")
    queue_events(9, kind="delivered", producer_id=own + 1000)
    batch_ship(store=store)

    today = date.today().isoformat()
    response = api.get(f"/v1/analytics/deliveries?from={today}&to={today}&group_by=channel")
    assert response.status_code == 200, response.content
    results = {row["channel"]: row for row in response.json()["results"]}
    assert results["email"]["counts"] == {"delivered": 4, "sent": 4, "failed": 1}
    assert results["email"]["latency_ms"]["accepted_to_provider"]["p50"] == 100
    assert results["sms"]["counts"] == {"delivered": 2, "sent": 2}
    everything = api.get("/v1/analytics/deliveries?group_by=day").json()["results"]
    assert [(row["day"], row["counts"]) for row in everything] == [
        (today, {"delivered": 6, "sent": 6, "failed": 1})
    ]

    other = APIClient()
    other_key = api_key_issue(producer_name="other", scopes=["users:read"]).key
    other.credentials(HTTP_AUTHORIZATION=f"Bearer {other_key}")
    assert other.get("/v1/analytics/deliveries").json()["results"] == []


@pytest.mark.parametrize(
    ("query", "field"), [("group_by=day,week", "group_by"), ("from=yesterday", "from")]
)
def test_a_deliveries_report_refuses_a_bad_day_or_grouping(api, store, query, field):
    response = api.get(f"/v1/analytics/deliveries?{query}")
    assert response.status_code == 400
    assert response.json()["error"]["field"] == field


def test_a_deliveries_report_window_is_at_most_366_days_and_may_be_empty(api, store):
    today = date.today()
    long = api.get(f"/v1/analytics/deliveries?from={today - timedelta(days=900)}&to={today}")
    assert long.status_code == 200
    assert long.json()["from"] == (today - timedelta(days=366)).isoformat()
    backwards = api.get(f"/v1/analytics/deliveries?from={today}&to={today - timedelta(days=1)}")
    assert (backwards.status_code, backwards.json()["results"]) == (200, [])


def test_an_erased_person_leaves_the_store_and_the_counts_stay(api, campaign, store):
    Recipient.objects.create(user_id="erase-me", email="erase-me@example.com")
    gone, kept = person_hash("erase-me"), person_hash("keep-me")
    common = {"producer_id": campaign.producer_id, "campaign_id": campaign.pk}
    queue_events(3, kind="delivered", person=gone, **common)
    queue_events(2, kind="delivered", person=kept, **common)
    batch_ship(store=store)
    queue_events(1, kind="opened", person=gone, **common)  # still queued when erased

    assert api.delete("/v1/users/erase-me").status_code in (200, 202, 204)
    erasures_apply(store=store)

    persons = store.query(f"SELECT person, count() FROM {EVENTS} GROUP BY person")
    assert persons == [(kept, 4)]  # two delivered, each with its `sent`
    assert batch_ship(store=store) == 0  # the queued one went with the erasure
    report = api.get(f"/v1/campaigns/{campaign.pk}/report").json()
    assert report["channels"]["email"]["delivered"] == 5


def test_metrics_show_the_analytics_lag_and_backlog(db, analytics_on):
    queue_events(3, occurred_at=timezone.now() - timedelta(seconds=30))
    text = Client().get("/metrics").content.decode()
    lag = next(
        line for line in text.splitlines() if line.startswith("notify_analytics_lag_seconds ")
    )
    assert 29 <= float(lag.split()[1]) < 120
    assert "notify_analytics_backlog 3.0" in text


def test_a_persons_year_old_deliveries_are_in_their_history_until_they_are_erased(
    api, producer_key, store
):
    Recipient.objects.create(user_id="old-timer", email="old@example.com")
    own = producer_key.api_key.producer_id
    year_ago = timezone.now() - timedelta(days=365)
    person = person_hash("old-timer")
    queue_events(2, kind="delivered", producer_id=own, person=person, occurred_at=year_ago)
    queue_events(1, kind="opened", producer_id=own, person=person, occurred_at=year_ago)
    queue_events(4, kind="delivered", producer_id=own + 1000, person=person)  # not theirs
    batch_ship(store=store)

    other = APIClient()
    other_key = api_key_issue(producer_name="other", scopes=["users:read"]).key
    other.credentials(HTTP_AUTHORIZATION=f"Bearer {other_key}")
    assert other.get("/v1/users/old-timer/history").json()["results"] == []  # not theirs

    page = api.get("/v1/users/old-timer/history?limit=2").json()
    assert [e["kind"] for e in page["results"]] == ["opened", "delivered"]
    assert page["results"][0]["occurred_at"].startswith(year_ago.date().isoformat())
    older = api.get(f"/v1/users/old-timer/history?cursor={page['next_cursor']}").json()
    # Each delivered with its `sent` just before it.
    assert [e["kind"] for e in older["results"]] == ["sent", "delivered", "sent"]
    assert older["next_cursor"] is None
    assert api.get("/v1/users/old-timer/history?before=2000-01-01T00:00:00Z").json() == {
        "results": [],
        "next_cursor": None,
    }

    assert api.delete("/v1/users/old-timer").status_code in (200, 202, 204)
    erasures_apply(store=store)
    assert api.get("/v1/users/old-timer/history").json()["results"] == []
