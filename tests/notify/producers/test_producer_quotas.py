"""Quotas in events per producer, at the API door: a batch is taken in part, in order; the
keys of one producer share its quotas; a day quota and the campaign quota refuse past
their count; and a producer without quotas costs Redis nothing more."""

from __future__ import annotations

import struct
import time
import uuid

import pytest
from django_redis import get_redis_connection
from rest_framework.test import APIClient

from campaigns.models import Campaign
from notify.api_keys import api_key_issue
from notify.models import Notification, Recipient
from notify.quotas import minute_bucket_key
from tests.campaigns.conftest import campaign_body, promo_data, seed_recipients  # noqa: F401
from tests.notify.feed.test_unread_count_cache import redis_round_trips
from tests.notify.intake.test_intake_api import ORDER, assert_error
from tests.notify.intake.test_rate_limits import redis_down  # noqa: F401 - a fixture used below

pytestmark = pytest.mark.django_db

DAY = 86_400


@pytest.fixture
def person(demo_data) -> str:
    Recipient.objects.create(user_id="q-1", email="q-1@example.com")
    return "q-1"


def client_of(name: str, *, scopes: list[str] | None = None, **quotas: int) -> APIClient:
    """A client with a new key of producer `name`, whose quotas are set to `quotas`."""
    issued = api_key_issue(producer_name=name, scopes=scopes, quotas=quotas)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {issued.key}")
    return client


def event(user_id: str = "q-1", **overrides) -> dict:
    return {
        "event_id": str(uuid.uuid4()),
        "user_id": user_id,
        "category": "order.shipped",
        "payload": dict(ORDER),
        **overrides,
    }


def send_batch(client: APIClient, events: list[dict]):
    response = client.post("/v1/notifications/batch", {"events": events}, format="json")
    assert response.status_code == 200, response.content
    return response


def statuses(response) -> list[int]:
    return [answer["status"] for answer in response.json()["results"]]


def assert_quota_refusal(response, naming: str, *, remaining: str = "0") -> None:
    error = assert_error(response, 429, "quota_exceeded")
    assert naming in error["message"]
    assert int(response["Retry-After"]) >= 1
    assert response["RateLimit-Remaining"] == remaining


def test_a_batch_past_the_minute_quota_is_accepted_up_to_it_in_order(person):
    shop = client_of("quota-shop", events_per_minute=100)
    events = [event() for _ in range(150)]
    response = send_batch(shop, events)
    assert statuses(response) == [202] * 100 + [429] * 50
    refused = response.json()["results"][100]
    assert refused["error"]["code"] == "quota_exceeded"
    assert "100 events per minute" in refused["error"]["message"]
    # Exactly the first 100 are stored; the refused ones are not.
    stored = set(Notification.objects.values_list("event_id", flat=True))
    assert stored == {e["event_id"] for e in events[:100]}
    assert (response["RateLimit-Limit"], response["RateLimit-Remaining"]) == ("100", "0")
    assert response["RateLimit-Policy"] == "100;w=60"
    assert int(response["Retry-After"]) >= 1
    # The next single event is refused whole, and not stored.
    single = shop.post("/v1/notifications", event(event_id="one-more"), format="json")
    assert_quota_refusal(single, "100 events per minute")
    assert 0 < int(single["RateLimit-Reset"]) <= 60
    assert not Notification.objects.filter(event_id="one-more").exists()


def test_invalid_items_get_their_own_answer_and_cost_no_quota(person):
    shop = client_of("quota-shop", events_per_minute=3)
    batch = [event(), event(category="no.such"), event(), event(user_id=""), event(), event()]
    assert statuses(send_batch(shop, batch)) == [202, 422, 202, 400, 202, 429]


def test_an_accepted_event_carries_the_quota_headers(person):
    shop = client_of("quota-shop", events_per_minute=10, events_per_day=1000)
    response = shop.post("/v1/notifications", event(), format="json")
    assert response.status_code == 202, response.content
    assert response["RateLimit-Policy"] == "10;w=60, 1000;w=86400"
    # The minute quota is the closer to being used up: 9 left of 10.
    assert (response["RateLimit-Limit"], response["RateLimit-Remaining"]) == ("10", "9")
    assert "Retry-After" not in response


def test_events_are_accepted_again_as_the_minute_refills(person):
    shop = client_of("quota-shop", events_per_minute=60)  # one event back each second
    assert statuses(send_batch(shop, [event() for _ in range(60)])) == [202] * 60
    refused = shop.post("/v1/notifications", event(), format="json")
    assert_quota_refusal(refused, "60 events per minute")
    # Waiting as told gives back one event (a real wait: the bucket refills N/60 a second).
    time.sleep(int(refused["Retry-After"]) + 0.05)
    assert shop.post("/v1/notifications", event(), format="json").status_code == 202
    assert shop.post("/v1/notifications", event(), format="json").status_code == 429
    # A whole minute later the whole quota is back. Not waited for: the bucket's stored
    # time is moved a minute back in Redis, which is what a minute passing looks like to
    # the script (it reads Redis's clock and refills from the stored time).
    producer_id = Notification.objects.first().producer_id
    redis = get_redis_connection("default")
    tokens, at = struct.unpack("<dd", redis.get(minute_bucket_key(producer_id)))
    redis.set(minute_bucket_key(producer_id), struct.pack("<dd", tokens, at - 60), ex=61)
    assert statuses(send_batch(shop, [event() for _ in range(61)])) == [202] * 60 + [429]


def test_the_keys_of_one_producer_share_its_quota(person):
    first = client_of("quota-shop", events_per_minute=10)
    second = client_of("quota-shop")
    assert statuses(send_batch(first, [event() for _ in range(6)])) == [202] * 6
    assert statuses(send_batch(second, [event() for _ in range(6)])) == [202] * 4 + [429] * 2
    # Another producer has quotas of its own.
    other = client_of("other-shop", events_per_minute=10)
    assert statuses(send_batch(other, [event() for _ in range(6)])) == [202] * 6


def test_a_day_quota_refuses_past_its_count_until_midnight(person):
    shop = client_of("quota-shop", events_per_day=5)
    assert statuses(send_batch(shop, [event() for _ in range(3)])) == [202] * 3
    response = send_batch(shop, [event() for _ in range(3)])
    assert statuses(response) == [202, 202, 429]
    assert "5 events per day" in response.json()["results"][2]["error"]["message"]
    assert response["RateLimit-Policy"] == "5;w=86400"
    single = shop.post("/v1/notifications", event(), format="json")
    assert_quota_refusal(single, "5 events per day")
    # Retry after UTC midnight, not after a token.
    until_midnight = DAY - time.time() % DAY
    assert abs(int(single["Retry-After"]) - until_midnight) <= 5
    assert Notification.objects.count() == 5


def test_the_settings_default_applies_and_a_producers_own_quota_wins(person, settings):
    settings.NOTIFY_PRODUCER_EVENTS_PER_MINUTE = 2
    default = client_of("default-shop")
    own = client_of("own-shop", events_per_minute=4)
    assert statuses(send_batch(default, [event() for _ in range(3)])) == [202, 202, 429]
    assert statuses(send_batch(own, [event() for _ in range(5)])) == [202] * 4 + [429]


def test_a_campaign_launch_past_the_campaign_quota_is_refused_and_not_created(promo_data):  # noqa: F811
    seed_recipients(4)
    marketing = client_of(
        "quota-shop", scopes=["campaigns:write"], campaign_events_per_day=6, events_per_day=1
    )
    launched = marketing.post("/v1/campaigns", campaign_body(), format="json")  # 4 people
    assert launched.status_code == 202, launched.content
    assert (launched["RateLimit-Limit"], launched["RateLimit-Remaining"]) == ("6", "2")
    three = campaign_body(audience={"user_ids": ["c-00000", "c-00001", "c-00002"]})
    refused = marketing.post("/v1/campaigns", three, format="json")
    # Whole or not at all: three do not fit in the two left, and nothing is taken.
    assert_quota_refusal(refused, "6 campaign recipients per day", remaining="2")
    assert Campaign.objects.count() == 1
    # Two fit what is left; the events quota (1 a day) is not the campaigns' one.
    two = campaign_body(audience={"user_ids": ["c-00000", "c-00001"]})
    assert marketing.post("/v1/campaigns", two, format="json").status_code == 202
    assert Campaign.objects.count() == 2


def test_a_producer_without_quotas_costs_no_extra_redis_round_trip(person, monkeypatch):
    plain = client_of("plain-shop")
    metered = client_of("metered-shop", events_per_minute=10_000)
    for client, trips in ((plain, 1), (metered, 2)):
        with redis_round_trips(monkeypatch) as sent:
            assert client.post("/v1/notifications", event(), format="json").status_code == 202
        assert len(sent) == trips, sent
        # A batch costs the same, whatever its size.
        with redis_round_trips(monkeypatch) as sent:
            send_batch(client, [event() for _ in range(200)])
        assert len(sent) == trips, sent


def test_with_redis_down_events_pass_uncounted_when_failing_open(person, redis_down):  # noqa: F811
    shop = client_of("quota-shop", events_per_minute=1)
    assert statuses(send_batch(shop, [event() for _ in range(3)])) == [202] * 3
    response = shop.post("/v1/notifications", event(), format="json")
    assert response.status_code == 202
    assert "RateLimit-Limit" not in response
