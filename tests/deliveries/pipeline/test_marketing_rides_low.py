"""A marketing category's work rides the low queue, whatever its row says: a campaign
never competes with login codes for the high queue's workers."""

from __future__ import annotations

import uuid

import pytest
from django.db import IntegrityError, connection, transaction

from deliveries.models import Delivery
from deliveries.pipeline.routing import notification_route
from notify.models import Category, Notification, Outbox

PROMO = {"headline": "Winter sale", "url": "https://shop.example/sale"}


def test_the_database_refuses_a_marketing_category_on_another_queue(demo_data):
    with pytest.raises(IntegrityError), transaction.atomic():
        Category.objects.filter(key="promo.weekly").update(queue="high")
    assert Category.objects.get(key="promo.weekly").queue == "low"


def test_a_marketing_event_rides_low_even_when_its_category_row_says_high(api):
    # A row the constraint never saw (restored from a dump without it, say): dropped in
    # this test's transaction only, and rolled back with it.
    with connection.cursor() as cursor:
        # The fixture's categories were given an owner in this transaction: check that
        # deferred key now, as PostgreSQL alters no table with checks still pending.
        cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
        cursor.execute("ALTER TABLE notify_category DROP CONSTRAINT category_marketing_rides_low")
    Category.objects.filter(key="promo.weekly").update(queue="high")

    body = {
        "event_id": str(uuid.uuid4()),
        "user_id": "demo-user",
        "category": "promo.weekly",
        "payload": PROMO,
    }
    response = api.post("/v1/notifications", body, format="json")
    assert response.status_code == 202, response.content
    notification = Notification.objects.get(pk=response.json()["notification_id"])
    assert Outbox.objects.get(notification=notification).queue == "low"

    notification_route(notification_id=str(notification.pk))
    queues = list(Delivery.objects.filter(notification=notification).values_list("queue"))
    assert queues and {queue for (queue,) in queues} == {"low"}
