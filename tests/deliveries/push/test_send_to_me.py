""" "Send test to me" on push templates: the version reaches the staff member's registered
devices through the local Web Push service and the local FCM."""

from __future__ import annotations

from deliveries.models import Delivery, DeliveryStatus
from deliveries.pipeline.attempt import delivery_attempt
from tests.deliveries.push.test_webpush import register_device
from tests.templates_admin.conftest import editor, editor_client, me, published_template, send_test

__all__ = ["editor", "editor_client", "me"]  # fixtures used below


def test_a_push_test_reaches_my_registered_devices(editor_client, me, api, push_service):
    _, body = push_service.subscribe("my-browser")
    register_device(api, "ed-1", body)

    said = send_test(editor_client, published_template("order.shipped", "webpush"))

    assert said == ["Test webpush queued for the Web Push devices of recipient ed-1."]
    delivery = Delivery.objects.get(notification__recipient=me, channel="webpush")
    delivery_attempt(delivery_id=delivery.pk)
    delivery.refresh_from_db()
    assert delivery.status == DeliveryStatus.DELIVERED, delivery.last_error
    [push] = push_service.accepted_for("my-browser")
    assert push.json()["title"].startswith("Order ")


def test_an_fcm_test_reaches_my_registered_phone(editor_client, me, api, fcm_service, settings):
    settings.NOTIFY_CHANNELS_ENABLED = [*settings.NOTIFY_CHANNELS_ENABLED, "fcm"]
    phone = {"kind": "fcm", "token": "my-phone-token", "platform": "android"}
    assert api.post("/v1/users/ed-1/devices", phone, format="json").status_code == 201

    said = send_test(editor_client, published_template("order.shipped", "fcm"))

    assert said == ["Test fcm queued for the FCM devices of recipient ed-1."]
    delivery = Delivery.objects.get(notification__recipient=me, channel="fcm")
    delivery_attempt(delivery_id=delivery.pk)
    delivery.refresh_from_db()
    assert delivery.status == DeliveryStatus.DELIVERED, delivery.last_error
    [sent] = fcm_service.sends_to("my-phone-token")
    assert sent["message"]["notification"]["title"].startswith("Order ")
