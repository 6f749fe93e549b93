"""A producer cancels a notification: what was not sent yet is never sent."""

from __future__ import annotations

import uuid
from datetime import timedelta

from django.utils import timezone
from rest_framework.test import APIClient

from deliveries.models import Delivery
from deliveries.pipeline.attempt import delivery_attempt
from deliveries.pipeline.outcome import AttemptResult
from deliveries.pipeline.routing import notification_route
from notify.api_keys import api_key_issue

ORDER = {"order_number": "X-1", "delivery_date": "2026-12-03", "items_count": 1}


def post(api, **extra) -> str:
    body = {
        "event_id": str(uuid.uuid4()),
        "user_id": "c1",
        "category": "order.shipped",
        "payload": ORDER,
        "channels": ["inapp", "email"],
        **extra,
    }
    response = api.post("/v1/notifications", body, format="json")
    assert response.status_code == 202, response.content
    return response.json()["notification_id"]


def statuses(api, notification_id: str) -> dict[str, str]:
    body = api.get(f"/v1/notifications/{notification_id}/status").json()
    return {d["channel"]: d["status"] for d in body["deliveries"]}


def test_cancelling_a_routed_notification_stops_its_waiting_email(api):
    api.put("/v1/users/c1", {"email": "c1@example.com", "locale": "en"}, format="json")
    notification_id = post(api)
    notification_route(notification_id=notification_id)  # in-app written, email queued

    assert api.delete(f"/v1/notifications/{notification_id}").status_code == 204
    assert statuses(api, notification_id) == {"inapp": "delivered", "email": "cancelled"}
    email = Delivery.objects.get(notification_id=notification_id, channel="email")
    assert delivery_attempt(delivery_id=email.pk).result is AttemptResult.NOT_CLAIMED
    # Nothing left: a second cancel says so.
    response = api.delete(f"/v1/notifications/{notification_id}")
    assert response.status_code == 409
    assert response.json()["error"]["code"] == "already_sent"


def test_cancelling_before_routing_means_nothing_is_created(api):
    api.put("/v1/users/c1", {"email": "c1@example.com", "locale": "en"}, format="json")
    notification_id = post(api, send_at=(timezone.now() + timedelta(days=1)).isoformat())
    assert api.delete(f"/v1/notifications/{notification_id}").status_code == 204
    notification_route(notification_id=notification_id)  # its time came
    body = api.get(f"/v1/notifications/{notification_id}/status").json()
    assert body["deliveries"] == []
    assert body["cancelled_at"] is not None


def test_only_the_producer_that_sent_it_may_cancel_it(api):
    api.put("/v1/users/c1", {"email": "c1@example.com", "locale": "en"}, format="json")
    notification_id = post(api)
    other = APIClient()
    other.credentials(HTTP_AUTHORIZATION=f"Bearer {api_key_issue(producer_name='other').key}")
    response = other.delete(f"/v1/notifications/{notification_id}")
    assert response.status_code == 404
