"""Support never sees what would let someone push to a device or sign as us: in admin a
device's endpoint, keys and FCM token, and a status webhook's signing secret, show only
as fingerprints, on every page, and the change forms can neither show nor change them."""

from __future__ import annotations

import hashlib

import pytest
from django.contrib.auth.models import Permission, User

from deliveries.models import Device, DeviceKind
from notify.models import Producer, Recipient
from tests.deliveries.push.peer import Subscriber, b64url
from webhooks.models import WebhookEndpoint
from webhooks.signing import secret_new

ENDPOINT = "https://push.example/wpush/v2/gAAAAABnSeCrEtCaPaBiLiTy-0123456789abcdef"
TOKEN = "dQw4w9WgXcQ:APA91bHSeCrEtFcMtOkEn-0123456789abcdefghijklmnopqrstuvwxyz"


def fingerprint(value: str) -> str:
    return hashlib.sha256(value.encode()).hexdigest()[:8]


@pytest.fixture
def support(client, db):
    """A support engineer: staff, who may look at people, devices and webhook endpoints."""
    user = User.objects.create_user("support", "support@example.com", "pw", is_staff=True)
    user.user_permissions.set(
        Permission.objects.filter(
            codename__in=[
                "view_recipient",
                "view_device",
                "change_device",
                "view_webhookendpoint",
                "change_webhookendpoint",
            ]
        )
    )
    client.force_login(user)
    return client


@pytest.fixture
def devices(db) -> tuple[Recipient, Device, Device]:
    person = Recipient.objects.create(user_id="secrets-1", locale="en")
    keys = Subscriber("secrets")
    browser = Device.objects.create(
        recipient=person,
        kind=DeviceKind.WEBPUSH,
        endpoint=ENDPOINT,
        p256dh=keys.p256dh,
        auth=b64url(keys.auth),
    )
    phone = Device.objects.create(
        recipient=person, kind=DeviceKind.FCM, token=TOKEN, platform="android"
    )
    return person, browser, phone


def secrets_of(browser: Device, phone: Device) -> list[str]:
    # The address's distinctive part too: a shortened address would still give it away.
    return [
        browser.endpoint,
        browser.endpoint.split("/")[-1],
        browser.p256dh,
        browser.auth,
        phone.token,
        phone.token[:24],
    ]


def test_device_pages_show_fingerprints_and_never_the_endpoint_keys_or_token(support, devices):
    person, browser, phone = devices
    pages = {
        "list": "/admin/deliveries/device/",
        "search results": f"/admin/deliveries/device/?q={person.user_id}",
        "browser": f"/admin/deliveries/device/{browser.pk}/change/",
        "phone": f"/admin/deliveries/device/{phone.pk}/change/",
        "person": f"/admin/notify/recipient/{person.pk}/change/",
    }
    for page, url in pages.items():
        response = support.get(url)
        assert response.status_code == 200, page
        html = response.content.decode()
        for secret in secrets_of(browser, phone):
            assert secret not in html, f"{page} shows {secret!r}"
        if page != "phone":
            assert fingerprint(ENDPOINT) in html, page
        if page != "browser":
            assert fingerprint(TOKEN) in html, page
    # The two devices are told apart; the browser's push service is named (not secret).
    browser_page = support.get(pages["browser"]).content.decode()
    assert "push.example" in browser_page
    assert fingerprint(f"{browser.p256dh}.{browser.auth}") in browser_page


def test_the_device_change_form_cannot_change_its_endpoint_or_token(support, devices):
    _, browser, phone = devices
    for device in (browser, phone):
        response = support.post(
            f"/admin/deliveries/device/{device.pk}/change/",
            {
                "installation_id": "",
                "platform": device.platform,
                "active": "",
                "deactivated_reason": "support: lost phone",
                "endpoint": "https://evil.example/x",
                "token": "forged",
                "p256dh": "x",
                "auth": "y",
            },
        )
        assert response.status_code == 302, response.content.decode()[-2000:]
        before = (device.endpoint, device.token, device.p256dh, device.auth)
        device.refresh_from_db()
        assert (device.endpoint, device.token, device.p256dh, device.auth) == before
        assert not device.active  # what support may change, it did


def test_webhook_endpoint_pages_show_the_secret_fingerprint_never_the_secret(support):
    endpoint = WebhookEndpoint.objects.create(
        producer=Producer.objects.create(name="hooks-owner"),
        url="https://hooks.example/notify",
        secret=secret_new(),
        previous_secret=secret_new(),
    )
    for url in (
        "/admin/webhooks/webhookendpoint/",
        f"/admin/webhooks/webhookendpoint/{endpoint.pk}/change/",
    ):
        html = support.get(url).content.decode()
        for secret in (endpoint.secret, endpoint.previous_secret):
            assert secret not in html
            assert secret.removeprefix("whsec_") not in html
    change = support.get(f"/admin/webhooks/webhookendpoint/{endpoint.pk}/change/")
    html = change.content.decode()
    assert fingerprint(endpoint.secret) in html
    assert fingerprint(endpoint.previous_secret) in html
    assert "secret" not in change.context["adminform"].form.fields
