"""What a producer sees at the API door: 202s, duplicates, and clear errors."""

from __future__ import annotations

import threading
import time
import uuid

import pytest
from django.db import connection
from rest_framework.test import APIClient

from notify.api_keys import api_key_issue, api_key_revoke
from notify.models import ApiKey, Notification, Outbox
from tests.waiting import wait_for

ORDER = {"order_number": "A-1", "delivery_date": "2026-12-03", "items_count": 1}


@pytest.fixture
def recipient(api):
    api.put("/v1/users/u1", {"email": "u1@example.com", "locale": "en"}, format="json")
    return "u1"


def event(**overrides):
    body = {
        "event_id": str(uuid.uuid4()),
        "user_id": "u1",
        "category": "order.shipped",
        "payload": dict(ORDER),
    }
    body.update(overrides)
    return body


def assert_error(response, status: int, code: str, field: str | None = None) -> dict:
    assert response.status_code == status, response.content
    error = response.json()["error"]
    assert error["code"] == code
    assert error["message"]
    if field is not None:
        assert error.get("field") == field
    return error


def test_accepted_event_is_stored_with_its_outbox_row(api, recipient):
    response = api.post("/v1/notifications", event(), format="json")
    assert response.status_code == 202
    notification = Notification.objects.get(pk=response.json()["notification_id"])
    assert Outbox.objects.filter(notification=notification, queue="medium").exists()


def test_text_with_quotes_backslashes_braces_and_the_word_null_is_stored_as_sent(api, recipient):
    awkward = 'say "hi" \\ {a,b} NULL'
    body = event(event_id=awkward, payload={**ORDER, "order_number": awkward})
    response = api.post("/v1/notifications", body, format="json")
    assert response.status_code == 202, response.content
    notification = Notification.objects.get(pk=response.json()["notification_id"])
    assert (notification.event_id, notification.payload["order_number"]) == (awkward, awkward)


def test_same_event_twice_returns_the_same_id(api, recipient):
    body = event(event_id="evt-1")
    first = api.post("/v1/notifications", body, format="json").json()
    second = api.post("/v1/notifications", body, format="json")
    assert second.status_code == 202
    assert second.json() == first
    assert Notification.objects.count() == 1


def test_same_event_id_with_another_body_is_a_conflict(api, recipient):
    api.post("/v1/notifications", event(event_id="evt-2"), format="json")
    changed = event(event_id="evt-2", payload={**ORDER, "items_count": 9})
    error = assert_error(
        api.post("/v1/notifications", changed, format="json"), 409, "event_conflict", "event_id"
    )
    assert "different body" in error["message"]
    assert Notification.objects.count() == 1


def test_payload_that_breaks_the_schema_names_the_field(api, recipient):
    payload = {"order_number": "A-1", "delivery_date": "2026-12-03"}
    error = assert_error(
        api.post("/v1/notifications", event(payload=payload), format="json"),
        400,
        "invalid_payload",
        "payload.items_count",
    )
    assert "items_count" in error["message"]
    wrong_type = {**ORDER, "items_count": "two"}
    assert_error(
        api.post("/v1/notifications", event(payload=wrong_type), format="json"),
        400,
        "invalid_payload",
        "payload.items_count",
    )


def test_missing_top_level_field_is_named(api, recipient):
    body = event()
    del body["event_id"]
    assert_error(api.post("/v1/notifications", body, format="json"), 400, "invalid", "event_id")


def test_malformed_json_gets_the_same_error_shape(api, recipient):
    response = api.post("/v1/notifications", "{not json", content_type="application/json")
    assert_error(response, 400, "malformed_json")


def test_unknown_category_and_unknown_recipient_are_clear(api, recipient):
    assert_error(
        api.post("/v1/notifications", event(category="no.such"), format="json"),
        422,
        "unknown_category",
        "category",
    )
    error = assert_error(
        api.post("/v1/notifications", event(user_id="ghost"), format="json"),
        422,
        "unknown_recipient",
        "user_id",
    )
    assert "PUT /v1/users/" in error["message"]
    assert Notification.objects.count() == 0


def test_body_over_64_kib_is_refused_with_413(api, recipient):
    huge = event(payload={**ORDER, "padding": "x" * (64 * 1024)})
    assert_error(api.post("/v1/notifications", huge, format="json"), 413, "payload_too_large")
    assert Notification.objects.count() == 0


def test_missing_wrong_and_revoked_keys_get_401(api, producer_key, recipient):
    anonymous = APIClient()
    response = anonymous.post("/v1/notifications", event(), format="json")
    assert_error(response, 401, "not_authenticated")
    assert response["WWW-Authenticate"].startswith("Bearer")

    wrong = APIClient()
    wrong.credentials(HTTP_AUTHORIZATION="Bearer nk_000000000000_nope")
    assert_error(
        wrong.post("/v1/notifications", event(), format="json"), 401, "authentication_failed"
    )

    api_key_revoke(api_key=producer_key.api_key)
    assert_error(
        api.post("/v1/notifications", event(), format="json"), 401, "authentication_failed"
    )


def test_key_scoped_to_other_categories_gets_403(demo_data, api, recipient):
    scoped = api_key_issue(producer_name="security-team", category_keys=["security.login_code"])
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {scoped.key}")
    assert_error(
        client.post("/v1/notifications", event(), format="json"),
        403,
        "category_not_allowed",
        "category",
    )
    login = event(category="security.login_code", payload={"code": "123456"})
    assert client.post("/v1/notifications", login, format="json").status_code == 202


def test_key_over_its_rate_gets_429_with_retry_after(api, producer_key, recipient):
    producer_key.api_key.rate_per_second = 0.5
    producer_key.api_key.rate_burst = 2
    producer_key.api_key.save()
    codes = [api.post("/v1/notifications", event(), format="json") for _ in range(3)]
    assert [r.status_code for r in codes[:2]] == [202, 202]
    assert_error(codes[2], 429, "rate_limited")
    assert 1 <= int(codes[2]["Retry-After"]) <= 2


def test_recipient_upsert_creates_then_updates_and_validates(api):
    created = api.put(
        "/v1/users/u9", {"email": "a@example.com", "timezone": "Asia/Tokyo"}, format="json"
    )
    assert created.status_code == 201
    updated = api.put("/v1/users/u9", {"locale": "ru-RU"}, format="json")
    assert updated.status_code == 200
    assert updated.json()["email"] == "a@example.com"
    assert updated.json()["locale"] == "ru-RU"
    assert_error(
        api.put("/v1/users/u9", {"timezone": "Mars/Olympus"}, format="json"),
        400,
        "invalid",
        "timezone",
    )
    assert_error(
        api.put("/v1/users/u9", {"phone": "12345"}, format="json"), 400, "invalid", "phone"
    )


def test_status_of_another_producers_notification_is_not_found(api, demo_data, recipient):
    notification_id = api.post("/v1/notifications", event(), format="json").json()[
        "notification_id"
    ]
    other = APIClient()
    other.credentials(HTTP_AUTHORIZATION=f"Bearer {api_key_issue(producer_name='other').key}")
    assert_error(other.get(f"/v1/notifications/{notification_id}/status"), 404, "not_found")
    assert api.get(f"/v1/notifications/{notification_id}/status").status_code == 200


def test_unknown_api_path_answers_json(api):
    assert_error(api.get("/v1/nothing-here"), 404, "not_found")


def test_openapi_schema_is_served_and_describes_the_intake(client):
    response = client.get("/v1/schema", HTTP_ACCEPT="application/vnd.oai.openapi+json")
    assert response.status_code == 200
    schema = response.json()
    assert "/v1/notifications" in schema["paths"]
    assert "202" in schema["paths"]["/v1/notifications"]["post"]["responses"]
    assert client.get("/v1/docs").status_code == 200


@pytest.mark.e2e
def test_fifty_concurrent_identical_posts_make_one_notification_and_one_email(
    pipeline, demo_data, producer_key
):
    setup = APIClient()
    setup.credentials(HTTP_AUTHORIZATION=f"Bearer {producer_key.key}")
    setup.put("/v1/users/u1", {"email": "u1@example.com"}, format="json")
    body = event(event_id="burst-1")
    answers: list[tuple[int, str]] = []
    barrier = threading.Barrier(50)

    def post() -> None:
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {producer_key.key}")
        barrier.wait()
        try:
            response = client.post("/v1/notifications", body, format="json")
            answers.append((response.status_code, response.json().get("notification_id")))
        finally:
            connection.close()

    threads = [threading.Thread(target=post) for _ in range(50)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert len(answers) == 50
    assert {status for status, _ in answers} == {202}
    assert len({notification_id for _, notification_id in answers}) == 1
    assert Notification.objects.count() == 1
    assert Outbox.objects.count() == 1
    wait_for(lambda: pipeline.received, what="the email")
    time.sleep(1)  # room for a duplicate to show up, if there were one
    assert len(pipeline.received) == 1


def test_a_key_revoked_elsewhere_is_refused_within_the_cache_bound_and_costs_no_query(
    api, producer_key, recipient, settings, django_assert_num_queries
):
    """Keys are cached per process: a request spends no query on its key, and a key
    revoked by another process (here: a direct UPDATE) stops working within the bound."""
    settings.NOTIFY_AUTH_CACHE_SECONDS = 1.0
    assert api.post("/v1/notifications", event(), format="json").status_code == 202
    # Warm: the key and the category come from memory; the event is one statement.
    with django_assert_num_queries(1):
        assert api.post("/v1/notifications", event(), format="json").status_code == 202

    ApiKey.objects.filter(pk=producer_key.api_key.pk).update(revoked_at="2026-01-01T00:00Z")
    assert api.post("/v1/notifications", event(), format="json").status_code == 202
    time.sleep(1.1)
    assert_error(
        api.post("/v1/notifications", event(), format="json"), 401, "authentication_failed"
    )


def test_a_batch_answers_each_event_in_order_and_repeating_it_creates_nothing(api, recipient):
    events = [event(event_id=f"batch-{n}") for n in range(1000)]
    events[3] = event(event_id="bad-payload", payload={**ORDER, "order_number": 7})
    events[5] = event(event_id="nobody", user_id="no-such-user")
    events[7] = event(event_id="unknown-category", category="no.such")
    events[9] = dict(events[8])  # the same event twice in one batch: one notification

    response = api.post("/v1/notifications/batch", {"events": events}, format="json")
    assert response.status_code == 200, response.content
    results = response.json()["results"]
    assert len(results) == 1000
    assert [r["status"] for r in results[:10]] == [202, 202, 202, 400, 202, 422, 202, 422, 202, 202]
    assert results[3]["error"]["field"] == "payload.order_number"
    assert results[5]["error"]["code"] == "unknown_recipient"
    assert results[9]["notification_id"] == results[8]["notification_id"]
    assert Notification.objects.count() == Outbox.objects.count() == 996

    again = api.post("/v1/notifications/batch", {"events": events}, format="json").json()
    assert [r.get("notification_id") for r in again["results"]] == [
        r.get("notification_id") for r in results
    ]
    assert Notification.objects.count() == 996

    events[0] = dict(events[0], payload={**ORDER, "items_count": 9})  # reused with a new body
    conflict = api.post("/v1/notifications/batch", {"events": events[:1]}, format="json")
    assert conflict.json()["results"][0]["status"] == 409


def test_a_batch_over_the_limit_is_refused_whole(api, recipient):
    events = [event() for _ in range(1001)]
    response = api.post("/v1/notifications/batch", {"events": events}, format="json")
    assert_error(response, 400, "invalid", field="events")
    assert Notification.objects.count() == 0
