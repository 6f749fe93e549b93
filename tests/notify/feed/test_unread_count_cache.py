"""The unread count on warm caches costs one Redis round trip (the rate limit's, which
reads the counter too) and no SQL, and what it caches (the API key, a user id's
recipient) still gives way to a revocation or an erasure within
NOTIFY_AUTH_CACHE_SECONDS."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext, override_settings
from django.utils import timezone
from django_redis import get_redis_connection
from redis.connection import AbstractConnection
from rest_framework.test import APIClient

from notify.api_keys import _keys, api_key_revoke
from notify.models import ApiKey, Recipient
from notify.selectors import _recipient_ids
from notify.tokens import user_token_issue
from notify.unread import unread_key
from tests.notify.feed.test_feed_and_unread import make_entries
from tests.notify.intake.test_intake_api import assert_error

BOUND = 0.3  # seconds: small, so the tests wait past it


@pytest.fixture
def caching(settings):
    """The caches on, as in production, and empty before and after the test (ids are
    reused across tests, rows are not)."""
    settings.NOTIFY_AUTH_CACHE_SECONDS = 60
    _keys.clear()
    _recipient_ids.clear()
    yield settings
    _keys.clear()
    _recipient_ids.clear()


@pytest.fixture
def alice(demo_data) -> Recipient:
    return Recipient.objects.create(user_id="alice", email="alice@example.com")


def client_for(key: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")
    return client


@contextmanager
def redis_round_trips(monkeypatch) -> Iterator[list[bytes]]:
    """What this process sends to Redis inside the block: one item per round trip (a
    pipeline's or a script's commands travel together), each the start of what was sent."""
    sent: list[bytes] = []
    send = AbstractConnection.send_packed_command

    def counting(self, command, check_health=True):
        packed = command if isinstance(command, bytes) else b"".join(command)
        sent.append(packed[:60])
        return send(self, command, check_health)

    with monkeypatch.context() as patch:
        patch.setattr(AbstractConnection, "send_packed_command", counting)
        yield sent


def count_without_sql(client: APIClient, user_id: str) -> tuple[int, dict]:
    """GET the unread count; (SQL statements it ran, its answer)."""
    with CaptureQueriesContext(connection) as queries:
        response = client.get(f"/v1/users/{user_id}/unread-count")
    assert response.status_code == 200, response.content
    return len(queries.captured_queries), response.json()


@pytest.mark.django_db(transaction=True)  # new entries count once committed
def test_a_warm_unread_count_with_an_api_key_runs_no_sql(caching, api, alice):
    make_entries(alice, 3)
    assert api.get("/v1/users/alice/unread-count").json() == {"count": 3}  # warms
    assert count_without_sql(api, "alice") == (0, {"count": 3})
    make_entries(alice, 2, start=3)
    assert count_without_sql(api, "alice") == (0, {"count": 5})


def test_a_warm_unread_count_with_a_user_token_runs_no_sql(caching, alice):
    make_entries(alice, 2)
    browser = client_for(user_token_issue(recipient_id=alice.pk))
    assert browser.get("/v1/users/alice/unread-count").json() == {"count": 2}  # warms
    assert count_without_sql(browser, "alice") == (0, {"count": 2})
    # The cache does not widen what a token reaches: another person's count is refused.
    Recipient.objects.create(user_id="bob")
    assert browser.get("/v1/users/bob/unread-count").status_code == 403


@pytest.mark.django_db(transaction=True)
def test_a_warm_unread_count_is_one_redis_round_trip(caching, api, alice, monkeypatch):
    make_entries(alice, 3)
    browser = client_for(user_token_issue(recipient_id=alice.pk))
    for client in (api, browser):
        assert client.get("/v1/users/alice/unread-count").json() == {"count": 3}  # warms
        with redis_round_trips(monkeypatch) as sent:
            assert count_without_sql(client, "alice") == (0, {"count": 3})
        # The rate limit's take and the counter's GET, in one script call.
        assert len(sent) == 1, sent
    # A counter gone from Redis is seeded from PostgreSQL again, as on a cold read.
    get_redis_connection("default").delete(unread_key(alice.pk))
    assert api.get("/v1/users/alice/unread-count").json() == {"count": 3}


def test_a_warm_unread_count_still_draws_from_the_callers_bucket(caching, alice):
    caching.NOTIFY_USER_RATE_PER_SECOND = 0.01  # no token comes back within the test
    caching.NOTIFY_USER_RATE_BURST = 2
    browser = client_for(user_token_issue(recipient_id=alice.pk))
    assert browser.get("/v1/users/alice/unread-count").json() == {"count": 0}  # warms
    assert browser.get("/v1/users/alice/unread-count").json() == {"count": 0}
    refused = browser.get("/v1/users/alice/unread-count")
    assert_error(refused, 429, "rate_limited")
    assert int(refused["Retry-After"]) >= 1


def test_a_warm_unread_count_with_redis_gone_says_unavailable(caching, api, alice):
    assert api.get("/v1/users/alice/unread-count").json() == {"count": 0}  # warms
    unreachable = {
        "default": {
            "BACKEND": "django_redis.cache.RedisCache",
            "LOCATION": "redis://127.0.0.1:1/0",  # nothing listens on port 1: refused at once
            "OPTIONS": {"SOCKET_CONNECT_TIMEOUT": 0.2, "SOCKET_TIMEOUT": 0.2},
        }
    }
    with override_settings(CACHES=unreachable):
        answer = api.get("/v1/users/alice/unread-count")
    assert answer.json() == {"count": None, "available": False}


def test_a_key_revoked_elsewhere_is_refused_within_the_bound(caching, api, producer_key, alice):
    caching.NOTIFY_AUTH_CACHE_SECONDS = BOUND
    assert api.get("/v1/users/alice/unread-count").status_code == 200
    # Another process revokes it: this one's cache is not told.
    ApiKey.objects.filter(pk=producer_key.api_key.pk).update(revoked_at=timezone.now())
    time.sleep(BOUND + 0.05)
    refused = api.get("/v1/users/alice/unread-count")
    assert refused.status_code == 401, refused.content


def test_a_key_revoked_in_this_process_is_refused_at_once(caching, api, producer_key, alice):
    assert api.get("/v1/users/alice/unread-count").status_code == 200
    api_key_revoke(api_key=producer_key.api_key)
    assert api.get("/v1/users/alice/unread-count").status_code == 401


def test_an_erased_person_gets_the_answers_of_an_unknown_one_at_once(caching, api, alice):
    make_entries(alice, 2)
    browser = client_for(user_token_issue(recipient_id=alice.pk))
    assert browser.get("/v1/users/alice/unread-count").json() == {"count": 2}
    assert api.get("/v1/users/alice/unread-count").json() == {"count": 2}
    assert api.delete("/v1/users/alice").status_code in (200, 202, 204)
    gone = api.get("/v1/users/alice/unread-count")
    assert gone.status_code == 404
    assert gone.json()["error"]["code"] == "unknown_recipient"
    assert browser.get("/v1/users/alice/unread-count").status_code == 401


def test_a_person_removed_elsewhere_is_unknown_here_within_the_bound(caching, api, alice):
    caching.NOTIFY_AUTH_CACHE_SECONDS = BOUND
    browser = client_for(user_token_issue(recipient_id=alice.pk))
    assert browser.get("/v1/users/alice/unread-count").status_code == 200
    # Another process erased the person: this one's cache is not told.
    Recipient.objects.filter(pk=alice.pk).delete()
    time.sleep(BOUND + 0.05)
    assert browser.get("/v1/users/alice/unread-count").status_code == 401
    assert api.get("/v1/users/alice/unread-count").status_code == 404


def test_an_unknown_user_is_404_and_is_found_once_registered(caching, api, demo_data):
    for _ in range(2):  # an unknown id is not cached as unknown
        missing = api.get("/v1/users/carol/unread-count")
        assert missing.status_code == 404
        assert missing.json()["error"]["code"] == "unknown_recipient"
    Recipient.objects.create(user_id="carol")
    assert api.get("/v1/users/carol/unread-count").json() == {"count": 0}
