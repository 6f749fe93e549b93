"""The end-user API answers browsers on the origins NOTIFY_INBOX_ALLOWED_ORIGINS lists, on
the operations a user token may reach, and nobody else."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from notify.models import Recipient
from notify.tokens import user_token_issue

PRODUCT = "https://app.example.com"
FEED = "/v1/users/demo-user/feed"


@pytest.fixture
def allowed(settings):
    settings.NOTIFY_INBOX_ALLOWED_ORIGINS = [PRODUCT]


def preflight(path: str, origin: str):
    return APIClient().options(
        path,
        HTTP_ORIGIN=origin,
        HTTP_ACCESS_CONTROL_REQUEST_METHOD="GET",
        HTTP_ACCESS_CONTROL_REQUEST_HEADERS="authorization, last-event-id",
    )


def test_a_listed_origin_gets_a_preflight_and_its_answers_marked(demo_data, allowed):
    answer = preflight("/v1/users/demo-user/stream", PRODUCT)
    assert answer.status_code == 204
    assert answer["Access-Control-Allow-Origin"] == PRODUCT
    assert "Last-Event-ID" in answer["Access-Control-Allow-Headers"]
    assert "Authorization" in answer["Access-Control-Allow-Headers"]
    assert "Access-Control-Allow-Credentials" not in answer  # tokens, never cookies

    token = user_token_issue(recipient_id=Recipient.objects.get(user_id="demo-user").pk)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    feed = client.get(FEED, HTTP_ORIGIN=PRODUCT)
    assert feed.status_code == 200
    assert feed["Access-Control-Allow-Origin"] == PRODUCT
    assert feed["Access-Control-Expose-Headers"] == "Retry-After"
    assert "Origin" in feed["Vary"]


def test_every_operation_a_user_token_may_reach_answers_a_preflight(demo_data, allowed):
    for operation in ("feed/read", "unread-count", "preferences", "devices", "devices/7"):
        answer = preflight(f"/v1/users/demo-user/{operation}", PRODUCT)
        assert (answer.status_code, answer["Access-Control-Allow-Origin"]) == (204, PRODUCT)
    # The inbox may ask for the person's preference-center link with their token.
    answer = preflight("/v1/users/demo-user/preference-center-link", PRODUCT)
    assert answer.status_code == 204
    assert answer["Access-Control-Allow-Origin"] == PRODUCT
    assert "POST" in answer["Access-Control-Allow-Methods"]


def test_other_origins_and_producer_endpoints_get_no_cross_origin_answer(demo_data, allowed):
    assert "Access-Control-Allow-Origin" not in preflight(FEED, "https://evil.example")
    assert "Access-Control-Allow-Origin" not in preflight("/v1/notifications", PRODUCT)
    assert "Access-Control-Allow-Origin" not in preflight("/v1/users/demo-user/tokens", PRODUCT)
    assert "Access-Control-Allow-Origin" not in preflight("/v1/users/demo-user", PRODUCT)
    assert "Access-Control-Allow-Origin" not in preflight("/v1/no-such-path", PRODUCT)


def test_no_origin_is_allowed_by_default(demo_data):
    assert "Access-Control-Allow-Origin" not in preflight(FEED, PRODUCT)
