"""Dead deliveries: visible to an operator, and re-driven from admin after a fix."""

from __future__ import annotations

import uuid

import pytest
from django.contrib.auth.models import User

from deliveries.models import Delivery, DeliveryRedrive
from notify.roles import redrive_group_ensure, support_group_ensure
from tests.waiting import wait_for

pytestmark = pytest.mark.e2e


def staff(client, name: str, *groups) -> User:
    user = User.objects.create_user(name, f"{name}@example.com", "pw", is_staff=True)
    user.groups.add(*groups)
    client.force_login(user)
    return user


def dead_email_delivery(api, smtp) -> Delivery:
    smtp.handler.default_data_answer = "451 4.4.1 Relay busy"
    api.put("/v1/users/d1", {"email": "d1@example.com", "locale": "en"}, format="json")
    notification_id = api.post(
        "/v1/notifications",
        {
            "event_id": str(uuid.uuid4()),
            "user_id": "d1",
            "category": "order.shipped",
            "channels": ["email"],
            "payload": {"order_number": "D-1", "delivery_date": "2026-12-03", "items_count": 1},
        },
        format="json",
    ).json()["notification_id"]
    return wait_for(
        lambda: Delivery.objects.filter(notification_id=notification_id, status="dead").first(),
        timeout=30,
        what="the email to die",
    )


def test_a_dead_delivery_re_driven_from_admin_is_delivered_and_the_action_recorded(
    api, pipeline, client
):
    smtp = pipeline
    delivery = dead_email_delivery(api, smtp)
    operator = staff(client, "olga", support_group_ensure(), redrive_group_ensure())

    listing = client.get("/admin/deliveries/delivery/", {"status__exact": "dead"})
    assert listing.status_code == 200
    assert list(listing.context["cl"].result_list) == [delivery]
    assert listing.context["dead_letter_depth"] is not None

    smtp.handler.default_data_answer = "250 OK"  # the relay is fixed
    response = client.post(
        "/admin/deliveries/delivery/",
        {"action": "redrive", "_selected_action": [delivery.pk]},
        follow=True,
    )
    assert response.status_code == 200
    assert "Re-driven: 1." in response.content.decode()

    wait_for(lambda: smtp.received, what="the re-driven email")

    def recorded() -> bool:
        delivery.refresh_from_db()
        return delivery.status == "delivered"

    wait_for(recorded, what="the outcome to be recorded")
    assert delivery.attempts == 7  # six before it died, one after the re-drive
    record = DeliveryRedrive.objects.get(delivery=delivery)
    assert (record.by, record.previous_status, record.previous_attempts) == (operator, "dead", 6)


def test_support_without_the_re_drive_permission_cannot_re_drive(api, pipeline, client):
    delivery = dead_email_delivery(api, pipeline)
    staff(client, "sid", support_group_ensure())
    listing = client.get("/admin/deliveries/delivery/")
    assert listing.status_code == 200
    assert "Re-drive" not in listing.content.decode()
    client.post(
        "/admin/deliveries/delivery/", {"action": "redrive", "_selected_action": [delivery.pk]}
    )
    delivery.refresh_from_db()
    assert delivery.status == "dead"
    assert not DeliveryRedrive.objects.exists()
