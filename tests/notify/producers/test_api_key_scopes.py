"""Least privilege for API keys: a key reaches only what its scopes name."""

from __future__ import annotations

import uuid
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.test import Client
from rest_framework.test import APIClient

from deliveries.models import Device
from notify.api_keys import _keys, api_key_authenticate, api_key_issue
from notify.models import ApiKey, Recipient
from preferences.models import ConsentRecord
from tests.deliveries.push.test_devices_api import webpush_body

ORDER = {"order_number": "A-1", "delivery_date": "2026-12-03", "items_count": 1}


def client_for(key: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")
    return client


def assert_missing_scope(response) -> None:
    assert response.status_code == 403, response.content
    error = response.json()["error"]
    assert error["code"] == "missing_scope"
    assert error["message"]


@pytest.fixture
def victim(api):
    api.put("/v1/users/victim", {"email": "victim@example.com"}, format="json")
    return "victim"


def test_a_send_only_key_cannot_touch_users_tokens_feeds_preferences_or_devices(demo_data, victim):
    issued = api_key_issue(
        producer_name="promo-team", category_keys=["promo.weekly"], scopes=["notifications:send"]
    )
    promo = client_for(issued.key)

    for response in (
        promo.put("/v1/users/victim", {"email": "evil@attacker.test"}, format="json"),
        promo.post("/v1/users/victim/tokens"),
        promo.get("/v1/users/victim/feed"),
        promo.get("/v1/users/victim/unread-count"),
        promo.get("/v1/users/victim/preferences"),
        promo.put("/v1/users/victim/preferences", {"categories": {}}, format="json"),
        promo.post(
            "/v1/users/victim/devices", webpush_body("https://push.example/x"), format="json"
        ),
    ):
        assert_missing_scope(response)
    assert Recipient.objects.get(user_id="victim").email == "victim@example.com"
    assert not Device.objects.filter(recipient__user_id="victim").exists()

    stream = Client(HTTP_AUTHORIZATION=f"Bearer {issued.key}").get("/v1/users/victim/stream")
    assert_missing_scope(stream)

    # What it may do still works.
    sent = promo.post(
        "/v1/notifications",
        {
            "event_id": str(uuid.uuid4()),
            "user_id": "victim",
            "category": "promo.weekly",
            "payload": {"headline": "Sale", "url": "https://shop.example/sale"},
        },
        format="json",
    )
    assert sent.status_code == 202, sent.content


def test_each_scope_opens_only_its_own_operations(demo_data, victim):
    reader = client_for(api_key_issue(producer_name="reader", scopes=["users:read"]).key)
    assert reader.get("/v1/users/victim/feed").status_code == 200
    assert reader.get("/v1/users/victim/unread-count").status_code == 200
    assert reader.get("/v1/users/victim/preferences").status_code == 200
    assert_missing_scope(reader.put("/v1/users/victim/preferences", {}, format="json"))
    event = {"event_id": "e-1", "user_id": "victim", "category": "order.shipped", "payload": ORDER}
    assert_missing_scope(reader.post("/v1/notifications", event, format="json"))

    tokens = client_for(api_key_issue(producer_name="login", scopes=["users:tokens"]).key)
    assert tokens.post("/v1/users/victim/tokens").status_code == 201
    assert_missing_scope(tokens.get("/v1/users/victim/feed"))

    crm = client_for(
        api_key_issue(producer_name="crm", scopes=["recipients:write", "preferences:write"]).key
    )
    assert crm.put("/v1/users/new-1", {"email": "n@example.com"}, format="json").status_code == 201
    body = {"categories": {"order.shipped": {"email": False}}, "source": "signup"}
    assert crm.put("/v1/users/victim/preferences", body, format="json").status_code == 200

    devices = client_for(api_key_issue(producer_name="app", scopes=["devices:write"]).key)
    web = devices.post(
        "/v1/users/victim/devices", webpush_body("https://push.example/v"), format="json"
    )
    assert web.status_code == 201, web.content
    assert devices.delete(f"/v1/users/victim/devices/{web.json()['device_id']}").status_code == 204


def test_a_key_holds_exactly_the_scopes_it_lists(demo_data, victim):
    # An empty list (nothing named, nothing written out) is no power at all.
    issued = api_key_issue(producer_name="nothing")
    ApiKey.objects.filter(pk=issued.api_key.pk).update(scopes=[])
    nothing = client_for(issued.key)
    assert_missing_scope(nothing.get("/v1/users/victim/feed"))
    event = {"event_id": "e-0", "user_id": "victim", "category": "order.shipped", "payload": ORDER}
    assert_missing_scope(nothing.post("/v1/notifications", event, format="json"))


def test_the_cached_key_carries_its_scopes(demo_data, victim, settings):
    settings.NOTIFY_AUTH_CACHE_SECONDS = 60
    _keys.clear()
    issued = api_key_issue(producer_name="cached", scopes=["users:read"])
    try:
        assert api_key_authenticate(key=issued.key).scopes == ["users:read"]
        narrowed = client_for(issued.key)
        assert narrowed.get("/v1/users/victim/feed").status_code == 200
        assert_missing_scope(narrowed.post("/v1/users/victim/tokens"))
    finally:
        _keys.clear()


def test_a_producer_cannot_record_consent_as_support(api, victim):
    body = {"categories": {"order.shipped": {"email": False}}, "source": "support"}
    response = api.put("/v1/users/victim/preferences", body, format="json")
    assert response.status_code == 400, response.content
    assert response.json()["error"]["field"] == "source"
    assert not ConsentRecord.objects.filter(source="support").exists()


def test_create_producer_narrows_scopes_and_prints_the_key_last(demo_data):
    out = StringIO()
    call_command("create_producer", "narrow", "--scopes", "users:read, users:tokens", stdout=out)
    key = out.getvalue().strip().splitlines()[-1]
    api_key = api_key_authenticate(key=key)
    assert api_key is not None
    assert api_key.scopes == ["users:read", "users:tokens"]

    out = StringIO()
    call_command("create_producer", "default", stdout=out)
    default = api_key_authenticate(key=out.getvalue().strip().splitlines()[-1])
    assert default.scopes == ["notifications:send"]

    with pytest.raises(CommandError, match="unknown scopes"):
        call_command("create_producer", "typo", "--scopes", "users:write", stdout=StringIO())
