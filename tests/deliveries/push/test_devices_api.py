"""POST/DELETE /v1/users/{id}/devices: shapes, validation, identity."""

from __future__ import annotations

from deliveries.models import Device
from deliveries.selectors import push_targets
from notify.models import Recipient
from tests.deliveries.push.peer import Subscriber, b64url


def webpush_body(endpoint: str) -> dict:
    subscriber = Subscriber("x")
    return {
        "kind": "webpush",
        "endpoint": endpoint,
        "keys": {"p256dh": subscriber.p256dh, "auth": b64url(subscriber.auth)},
    }


def test_registering_and_removing_a_browser_and_a_phone(api):
    api.put("/v1/users/dev-1", {}, format="json")
    web = api.post("/v1/users/dev-1/devices", webpush_body("https://push.example/a"), format="json")
    phone = api.post(
        "/v1/users/dev-1/devices",
        {"kind": "fcm", "token": "tok-1", "platform": "android"},
        format="json",
    )
    assert web.status_code == phone.status_code == 201
    recipient = Recipient.objects.get(user_id="dev-1")
    assert push_targets(recipient=recipient, channel="webpush") == [str(web.json()["device_id"])]
    assert push_targets(recipient=recipient, channel="fcm") == [str(phone.json()["device_id"])]

    gone = api.delete(f"/v1/users/dev-1/devices/{web.json()['device_id']}")
    assert gone.status_code == 204
    assert push_targets(recipient=recipient, channel="webpush") == []
    assert api.delete(f"/v1/users/dev-1/devices/{web.json()['device_id'] + 999}").status_code == 404


def test_an_installation_id_keeps_one_device_across_new_tokens(api):
    api.put("/v1/users/dev-2", {}, format="json")
    first = api.post(
        "/v1/users/dev-2/devices",
        {"kind": "fcm", "token": "old", "platform": "ios", "installation_id": "iphone-1"},
        format="json",
    ).json()["device_id"]
    again = api.post(
        "/v1/users/dev-2/devices",
        {"kind": "fcm", "token": "new", "platform": "ios", "installation_id": "iphone-1"},
        format="json",
    ).json()["device_id"]
    assert first == again
    assert Device.objects.get(pk=first).token == "new"
    assert Device.objects.filter(recipient__user_id="dev-2").count() == 1


def test_bad_device_bodies_get_a_clear_error(api):
    api.put("/v1/users/dev-3", {}, format="json")
    no_keys = api.post(
        "/v1/users/dev-3/devices",
        {"kind": "webpush", "endpoint": "https://p.example/1"},
        format="json",
    )
    assert no_keys.status_code == 400
    assert no_keys.json()["error"]["field"] == "keys"
    bad_key = webpush_body("https://p.example/2")
    bad_key["keys"]["p256dh"] = "AAAA"
    assert api.post("/v1/users/dev-3/devices", bad_key, format="json").status_code == 400
    no_token = api.post("/v1/users/dev-3/devices", {"kind": "fcm"}, format="json")
    assert no_token.status_code == 400
    body = webpush_body("https://p.example/3")
    unknown = api.post("/v1/users/nobody/devices", body, format="json")
    assert unknown.status_code == 404
    assert unknown.json()["error"]["code"] == "unknown_recipient"


def test_a_browser_registers_its_own_subscription_with_its_user_token_and_no_one_elses(api):
    from rest_framework.test import APIClient

    for user_id in ("self-a", "self-b"):
        api.put(f"/v1/users/{user_id}", {"locale": "en"}, format="json")
    token = api.post("/v1/users/self-a/tokens").json()["token"]
    browser = APIClient()
    browser.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")

    mine = browser.post(
        "/v1/users/self-a/devices", webpush_body("https://push.example/a"), format="json"
    )
    assert mine.status_code == 201
    theirs = browser.post(
        "/v1/users/self-b/devices", webpush_body("https://push.example/b"), format="json"
    )
    assert theirs.status_code == 403
    assert not Device.objects.filter(recipient__user_id="self-b").exists()
    assert browser.delete(f"/v1/users/self-a/devices/{mine.json()['device_id']}").status_code == 204
