"""Reading an in-app notification is an event of its delivery, written with the marking
(and only what the marking changed: marking it again counts nothing)."""

from __future__ import annotations

import uuid

from analytics.models import AnalyticsEvent
from deliveries.pipeline.routing import notification_route
from notify.models import Category, FeedEntry, Producer, Recipient
from notify.services import notification_accept


def test_marking_an_in_app_notification_read_counts_one_read(api, demo_data, analytics_on):
    Recipient.objects.create(user_id="reader", email="reader@example.com")
    accepted = notification_accept(
        producer=Producer.objects.get_or_create(name="reads")[0],
        event_id=str(uuid.uuid4()),
        user_id="reader",
        category=Category.objects.get(key="order.shipped"),
        payload={"order_number": "R-1", "delivery_date": "2026-12-03", "items_count": 1},
        channels=["inapp"],
        ttl_seconds=None,
    )
    notification_route(notification_id=str(accepted.notification_id))
    [entry] = FeedEntry.objects.filter(recipient__user_id="reader")

    for _ in range(2):
        response = api.post("/v1/users/reader/feed/read", {"ids": [entry.pk]}, format="json")
        assert response.status_code == 200

    [read] = AnalyticsEvent.objects.filter(kind="read")
    assert (read.channel, read.notification_id) == ("inapp", accepted.notification_id)
    assert set(AnalyticsEvent.objects.values_list("kind", flat=True)) == {
        "accepted",
        "delivered",  # written into the feed: its one try (the store also counts it sent)
        "read",
    }
