"""Rate limits on every API operation: per API key, per end user, and with Redis down."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from notify.api_keys import api_key_issue
from notify.models import Recipient
from tests.deliveries.ops.conftest import closed_port
from tests.notify.intake.test_intake_api import assert_error


def _client(token: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    return client


@pytest.fixture
def redis_down(settings):
    """The limiter's Redis (the `default` cache) pointed at a port where nothing listens."""
    caches = {name: dict(conf) for name, conf in settings.CACHES.items()}
    caches["default"]["LOCATION"] = f"redis://127.0.0.1:{closed_port()}/0"
    settings.CACHES = caches


def _tight(api_key) -> None:
    api_key.rate_per_second = 0.01  # no token comes back within the test
    api_key.rate_burst = 3
    api_key.save()


def test_every_producer_operation_draws_from_the_keys_one_bucket(api, producer_key):
    _tight(producer_key.api_key)
    assert api.put("/v1/users/rl-1", {"locale": "en"}, format="json").status_code == 201
    assert api.get("/v1/users/rl-1/feed").status_code == 200
    assert api.get("/v1/users/rl-1/preferences").status_code == 200
    # The bucket is empty now, whatever the operation: not only intake is limited.
    refused = [
        api.get("/v1/users/rl-1/unread-count"),
        api.put("/v1/users/rl-1/preferences", {}, format="json"),
        api.post("/v1/users/rl-1/tokens"),
        api.post("/v1/users/rl-1/devices", {"kind": "fcm", "token": "t"}, format="json"),
        api.get("/v1/notifications/00000000-0000-0000-0000-000000000000/status"),
        api.get("/v1/campaigns/1"),
        api.put("/v1/users/rl-1", {"locale": "ru"}, format="json"),
    ]
    for response in refused:
        assert_error(response, 429, "rate_limited")
        assert int(response["Retry-After"]) >= 1
    # Another key has a bucket of its own.
    other = _client(api_key_issue(producer_name="another-shop", scopes=["users:read"]).key)
    assert other.get("/v1/users/rl-1/feed").status_code == 200


def test_an_end_users_token_is_limited_per_user(api, settings):
    settings.NOTIFY_USER_RATE_PER_SECOND = 0.01
    settings.NOTIFY_USER_RATE_BURST = 2
    for user_id in ("rl-a", "rl-b"):
        api.put(f"/v1/users/{user_id}", {"locale": "en"}, format="json")
    alice = _client(api.post("/v1/users/rl-a/tokens").json()["token"])
    bob = _client(api.post("/v1/users/rl-b/tokens").json()["token"])
    assert alice.get("/v1/users/rl-a/unread-count").status_code == 200
    assert alice.get("/v1/users/rl-a/feed").status_code == 200
    refused = alice.get("/v1/users/rl-a/preferences")
    assert_error(refused, 429, "rate_limited")
    assert int(refused["Retry-After"]) >= 1
    # Bob's bucket and the producer's are untouched by Alice's requests.
    assert bob.get("/v1/users/rl-b/feed").status_code == 200
    assert api.get("/v1/users/rl-a/feed").status_code == 200


def test_redis_down_fails_open_by_default(api, redis_down, settings):
    assert settings.NOTIFY_API_RATE_LIMIT_FAIL_OPEN is True
    response = api.put("/v1/users/rl-open", {"locale": "en"}, format="json")
    assert response.status_code == 201, response.content


def test_redis_down_fails_closed_when_configured(api, redis_down, settings):
    settings.NOTIFY_API_RATE_LIMIT_FAIL_OPEN = False
    response = api.put("/v1/users/rl-closed", {"locale": "en"}, format="json")
    assert_error(response, 503, "rate_limiter_unavailable")
    assert response["Retry-After"] == "1"
    assert not Recipient.objects.filter(user_id="rl-closed").exists()
