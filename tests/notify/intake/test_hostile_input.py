"""Hostile input at the producer API: always a 4xx with the error shape, never a 500."""

from __future__ import annotations

import uuid

import pytest
from django.test import Client

from notify.models import Notification

ORDER = {"order_number": "A-1", "delivery_date": "2026-12-03", "items_count": 1}


@pytest.fixture
def recipient(api):
    api.put("/v1/users/u1", {"email": "u1@example.com", "locale": "en"}, format="json")
    return "u1"


def post_raw(api, path: str, text: str):
    """Post `text` as the JSON body, byte for byte (lone surrogates as `\\ud800` escapes)."""
    return api.post(path, data=text.encode(), content_type="application/json")


def event_json(payload_json: str) -> str:
    return (
        f'{{"event_id": "{uuid.uuid4()}", "user_id": "u1", "category": "order.shipped", '
        f'"payload": {payload_json}}}'
    )


def assert_refused(response, status: int = 400, field: str | None = None) -> dict:
    assert response.status_code == status, response.content
    error = response.json()["error"]
    assert set(error) <= {"code", "message", "field"}
    assert error["code"] and error["message"]
    if field is not None:
        assert error.get("field") == field
    return error


@pytest.mark.parametrize(
    ("payload", "field"),
    [
        (
            '{"order_number": "A\\u0000B", "delivery_date": "2026-12-03", "items_count": 1}',
            "payload.order_number",
        ),
        (
            '{"order_number": "A\\ud800", "delivery_date": "2026-12-03", "items_count": 1}',
            "payload.order_number",
        ),
        (
            '{"order_number": "A", "delivery_date": "2026-12-03", "items_count": 1e999}',
            "payload.items_count",
        ),
        (
            '{"order_number": "A", "delivery_date": "2026-12-03", "items_count": NaN}',
            "payload.items_count",
        ),
        (
            '{"order_number": "A", "delivery_date": "2026-12-03", "items_count": -Infinity}',
            "payload.items_count",
        ),
        (
            '{"order_number": "A", "delivery_date": "2026-12-03", "items_count": 1, '
            '"notes": [{"x": "\\u0000"}]}',
            "payload.notes.0.x",
        ),
    ],
)
def test_nul_surrogates_and_non_finite_numbers_are_refused_naming_the_field(
    api, recipient, payload, field
):
    response = post_raw(api, "/v1/notifications", event_json(payload))
    error = assert_refused(response, 400, field)
    assert error["code"] == "invalid"
    assert not Notification.objects.exists()


@pytest.mark.parametrize("key", ["\\u0000", "\\ud800", "a\\udfffb"])
def test_bad_characters_in_keys_are_refused(api, recipient, key):
    payload = (
        f'{{"order_number": "A", "delivery_date": "2026-12-03", "items_count": 1, "{key}": 1}}'
    )
    error = assert_refused(post_raw(api, "/v1/notifications", event_json(payload)), 400)
    assert error["field"].startswith("payload.")


def test_bad_characters_in_a_batch_are_refused(api, recipient):
    body = f'{{"events": [{event_json(chr(123) + chr(34) + "a" + chr(34) + ": 1e999}")}]}}'
    assert_refused(post_raw(api, "/v1/notifications/batch", body), 400, "events.0.payload.a")


@pytest.mark.parametrize(
    ("path", "depth"),
    [
        ("/v1/notifications", 40),
        ("/v1/notifications", 5000),
        # Past the interpreter's recursion limit: the parser itself must not fail.
        ("/v1/notifications/batch", 200_000),
    ],
)
def test_deeply_nested_json_is_refused(api, recipient, path, depth):
    nested = "[" * depth + "]" * depth
    response = post_raw(api, path, event_json(f'{{"deep": {nested}}}'))
    error = assert_refused(response, 400)
    assert error["code"] in ("invalid", "malformed_json")


def test_nested_json_within_the_limit_is_accepted(api, recipient, settings):
    settings.NOTIFY_API_MAX_JSON_DEPTH = 32
    payload = dict(ORDER, extra=[[[["fine"]]]])
    body = {"event_id": "ok-1", "user_id": "u1", "category": "order.shipped", "payload": payload}
    # order.shipped's schema allows extra fields; only the depth is under test here.
    assert api.post("/v1/notifications", body, format="json").status_code == 202


def test_a_long_or_binary_user_id_in_the_path_is_refused(api):
    long_id = "u" * 300
    assert_refused(api.put(f"/v1/users/{long_id}", {}, format="json"), 400, "user_id")
    assert_refused(api.get(f"/v1/users/{long_id}/feed"), 400, "user_id")
    assert_refused(api.get(f"/v1/users/{long_id}/preferences"), 400, "user_id")
    assert_refused(api.post(f"/v1/users/{long_id}/tokens"), 400, "user_id")
    assert_refused(api.put("/v1/users/a%00b", {}, format="json"), 400, "user_id")


def test_a_255_character_user_id_is_fine(api):
    assert api.put(f"/v1/users/{'u' * 255}", {}, format="json").status_code == 201


def test_lists_and_ids_are_bounded(api, recipient, settings):
    settings.NOTIFY_API_MAX_LIST_ITEMS = 1000
    too_many = {"ids": list(range(1, 1002))}
    assert_refused(api.post("/v1/users/u1/feed/read", too_many, format="json"), 400, "ids")
    huge = {"ids": [2**70]}
    assert_refused(api.post("/v1/users/u1/feed/read", huge, format="json"), 400, "ids.0")
    channels = {
        "event_id": "c-1",
        "user_id": "u1",
        "category": "order.shipped",
        "payload": ORDER,
        "channels": ["inapp"] * 50,
    }
    assert_refused(api.post("/v1/notifications", channels, format="json"), 400, "channels")


def test_a_uri_field_accepts_only_http_and_https(api, recipient):
    for url in ["javascript:alert(1)", "data:text/html,hi", "/relative", "https://"]:
        body = {
            "event_id": str(uuid.uuid4()),
            "user_id": "u1",
            "category": "promo.weekly",
            "payload": {"headline": "Sale", "url": url},
        }
        response = api.post("/v1/notifications", body, format="json")
        error = assert_refused(response, 400, "payload.url")
        assert error["code"] == "invalid_payload"
    body["payload"]["url"] = "https://shop.example/sale"
    body["event_id"] = str(uuid.uuid4())
    assert api.post("/v1/notifications", body, format="json").status_code == 202


@pytest.mark.parametrize(
    ("query", "headers", "field"),
    [
        ("?device_id=abc", {}, "device_id"),
        ("?device_id=" + "9" * 40, {}, "device_id"),
        ("?device_id=%C2%B2", {}, "device_id"),
        ("", {"HTTP_LAST_EVENT_ID": "not-a-number"}, "Last-Event-ID"),
        ("", {"HTTP_LAST_EVENT_ID": "9" * 40}, "Last-Event-ID"),
        ("", {"HTTP_LAST_EVENT_ID": "²"}, "Last-Event-ID"),
    ],
)
def test_garbage_stream_parameters_are_refused(producer_key, recipient, query, headers, field):
    client = Client(HTTP_AUTHORIZATION=f"Bearer {producer_key.key}")
    response = client.get(f"/v1/users/u1/stream{query}", **headers)
    assert_refused(response, 400, field)


def test_a_long_user_id_on_the_stream_is_refused(producer_key):
    client = Client(HTTP_AUTHORIZATION=f"Bearer {producer_key.key}")
    assert_refused(client.get(f"/v1/users/{'u' * 300}/stream"), 400, "user_id")


@pytest.mark.parametrize("key", ["nk_\x00_x", "nk_" + "a" * 300 + "_x", "nk_\xff\xfe_x"])
def test_a_garbled_api_key_is_a_401(db, key):
    client = Client(HTTP_AUTHORIZATION=f"Bearer {key}")
    assert_refused(client.get("/v1/users/u1/feed"), 401)
    assert_refused(client.get("/v1/users/u1/stream"), 401)
