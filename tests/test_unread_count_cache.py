"""The unread count on warm caches costs Redis alone, and what it caches (the API key, a
user id's recipient) still gives way to a revocation or an erasure within
NOTIFY_AUTH_CACHE_SECONDS."""

from __future__ import annotations

import time

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from rest_framework.test import APIClient

from notify.models import ApiKey, Recipient
from notify.selectors import _recipient_ids
from notify.services import _keys, api_key_revoke
from notify.tokens import user_token_issue
from tests.test_feed_and_unread import make_entries

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
