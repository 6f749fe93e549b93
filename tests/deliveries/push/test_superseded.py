"""A late, older event about a subject the person already heard about: not sent on
email or push (superseded), and in the feed at the time it happened."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from tests.deliveries.pipeline.test_pipeline_e2e import post_event, register
from tests.deliveries.push.test_webpush import register_device
from tests.statuses import settled
from tests.waiting import wait_for

pytestmark = pytest.mark.e2e

CHANNELS = {"inapp", "email", "webpush"}


def order(number: str) -> dict:
    return {"order_number": number, "delivery_date": "2026-12-03", "items_count": 1}


def test_a_late_older_event_is_superseded_on_email_and_push_and_sits_in_the_feed(
    api, pipeline, push_service
):
    smtp = pipeline
    register(api, "late-1", email="late@example.com", locale="en")
    _, body = push_service.subscribe("late-phone")
    register_device(api, "late-1", body)
    now = timezone.now()

    def send(number: str, occurred_at) -> str:
        return post_event(
            api,
            user_id="late-1",
            payload=order(number),
            channels=sorted(CHANNELS),
            subject="order:L-1",
            occurred_at=occurred_at.isoformat(),
        ).json()["notification_id"]

    cancelled = send("L-1-cancelled", now - timedelta(seconds=10))
    first = wait_for(settled(api, cancelled, CHANNELS), what="the newer event")
    assert {c: d["status"] for c, d in first.items()} == dict.fromkeys(CHANNELS, "delivered")

    # "paid" happened before "cancelled"; the producer's retry delivers it only now.
    paid = send("L-1-paid", now - timedelta(minutes=1))
    late = wait_for(settled(api, paid, CHANNELS), what="the late event")

    assert {c: (d["status"], d["reason"]) for c, d in late.items()} == {
        "inapp": ("delivered", ""),
        "email": ("superseded", "newer_delivered"),
        "webpush": ("superseded", "newer_delivered"),
    }
    assert [m.subject for m in smtp.received] == ["Order L-1-cancelled has shipped"]
    assert [p.json()["title"] for p in push_service.accepted_for("late-phone")] == [
        "Order L-1-cancelled shipped"
    ]
    feed = api.get("/v1/users/late-1/feed").json()["results"]
    assert [e["notification_id"] for e in feed] == [cancelled, paid]  # latest event first
