"""What the schema says an operation answers is what it answers: spot checks by hand."""

from __future__ import annotations

import yaml
from rest_framework.test import APIClient

from tests.notify.intake.test_intake_api import assert_error


def _operation(path: str, method: str) -> dict:
    schema = yaml.safe_load(APIClient().get("/v1/schema").content)
    return schema["paths"][path][method]


def test_every_body_has_a_size_limit_that_answers_413(api, settings):
    settings.NOTIFY_MAX_BODY_BYTES = 2048
    body = {"categories": {}, "consent_text_version": "x" * 4096}
    response = api.put("/v1/users/demo-user/preferences", body, format="json")
    assert_error(response, 413, "payload_too_large")
    documented = _operation("/v1/users/{user_id}/preferences", "put")["responses"]
    assert {"400", "401", "403", "404", "409", "413", "422", "429"} <= set(documented)
    error = documented["413"]["content"]["application/json"]["schema"]["$ref"]
    assert error.endswith("/ErrorResponseOut")


def test_path_user_ids_state_their_real_limits(db):
    (user_id,) = [
        p
        for p in _operation("/v1/users/{user_id}/feed", "get")["parameters"]
        if p["name"] == "user_id"
    ]
    assert user_id["schema"]["maxLength"] == 255
    assert user_id["schema"]["pattern"].startswith("^[^")
    limit = next(
        p
        for p in _operation("/v1/users/{user_id}/feed", "get")["parameters"]
        if p["name"] == "limit"
    )
    assert (limit["schema"]["minimum"], limit["schema"]["maximum"]) == (1, 100)


def test_the_live_stream_is_in_the_schema_with_every_status_it_answers(api):
    stream = _operation("/v1/users/{user_id}/stream", "get")
    assert set(stream["responses"]) == {"200", "400", "401", "403", "404", "429"}
    assert "text/event-stream" in stream["responses"]["200"]["content"]
    parameters = {p["name"]: p for p in stream["parameters"]}
    assert parameters["user_id"]["schema"]["maxLength"] == 255
    assert parameters["device_id"]["schema"]["pattern"] == "^[0-9]{1,18}$"
    assert parameters["Last-Event-ID"]["in"] == "header"
    # What it documents, it answers (the errors come before any event is streamed).
    assert_error(api.get("/v1/users/demo-user/stream?device_id=abc"), 400, "invalid")
    assert_error(api.get("/v1/users/nobody-at-all/stream"), 404, "unknown_recipient")
    assert APIClient().get("/v1/users/demo-user/stream").status_code == 401


def test_a_method_the_live_stream_does_not_have_is_a_405_naming_get(producer_key):
    # As a browser-less client calls it: CSRF checks on, as in the deployed stack, so a
    # POST meets the 405 and not the CSRF check's HTML page.
    client = APIClient(enforce_csrf_checks=True)
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {producer_key.key}")
    for method in ("post", "put", "patch", "delete", "options", "head"):
        response = getattr(client, method)("/v1/users/demo-user/stream")
        assert response.status_code == 405, (method, response.content)
        assert response["Allow"] == "GET", method
        if method != "head":
            assert_error(response, 405, "method_not_allowed")


def test_a_created_resource_links_to_the_operations_on_it(db):
    def links(path: str, method: str, status: str) -> dict:
        return _operation(path, method)["responses"][status]["links"]

    campaign = links("/v1/campaigns", "post", "202")
    assert set(campaign) == {"get_campaign", "pause_campaign", "resume_campaign", "cancel_campaign"}
    assert campaign["pause_campaign"] == {
        "operationId": "pause_campaign",
        "parameters": {"campaign_id": "$response.body#/campaign_id"},
    }
    assert set(links("/v1/notifications", "post", "202")) == {
        "get_notification_status",
        "cancel_notification",
    }
    device = links("/v1/users/{user_id}/devices", "post", "201")["remove_device"]
    assert device["parameters"] == {
        "user_id": "$request.path.user_id",
        "device_id": "$response.body#/device_id",
    }
    for status in ("200", "201"):
        assert set(links("/v1/users/{user_id}", "put", status)) == {
            "list_feed",
            "get_unread_count",
            "get_preferences",
            "update_preferences",
            "register_device",
            "create_user_token",
        }
    schema = yaml.safe_load(APIClient().get("/v1/schema").content)
    assert "x-linked-from" not in str(schema)  # the declarations are not served
