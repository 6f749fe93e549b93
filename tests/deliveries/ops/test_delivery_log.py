"""One log line per delivery outcome, carrying the ids and facts support sees in admin."""

from __future__ import annotations

import logging

from deliveries.models import Delivery
from deliveries.pipeline.attempt import delivery_attempt
from deliveries.pipeline.routing import notification_route

ORDER = {"order_number": "L-7", "delivery_date": "2026-12-03", "items_count": 1}


def test_each_delivery_outcome_is_one_structured_log_line(db, api, caplog):
    api.put("/v1/users/log1", {"email": "log1@example.com"}, format="json")
    notification_id = api.post(
        "/v1/notifications",
        {
            "event_id": "log-1",
            "user_id": "log1",
            "category": "order.shipped",
            "payload": ORDER,
            "channels": ["inapp"],
        },
        format="json",
    ).json()["notification_id"]
    with caplog.at_level(logging.INFO, logger="deliveries.outcome"):
        # Routing writes the in-app entry at once; a second attempt finds nothing to do.
        notification_route(notification_id=notification_id)
        delivery = Delivery.objects.get(notification_id=notification_id, channel="inapp")
        delivery_attempt(delivery_id=delivery.pk)

    lines = [r for r in caplog.records if getattr(r, "event", "") == "delivery_outcome"]
    assert len(lines) == 1
    line = lines[0]
    assert (line.notification_id, line.delivery_id, line.channel) == (
        notification_id,
        delivery.pk,
        "inapp",
    )
    assert (line.status, line.reason, line.attempt) == ("delivered", "", 1)
    assert isinstance(line.duration_ms, int)
    # The text itself is greppable key=value, for a plain log search.
    message = line.getMessage()
    assert f"notification={notification_id}" in message
    assert f"delivery={delivery.pk}" in message
    assert "channel=inapp status=delivered" in message


def test_a_rounds_delivered_members_are_one_line_and_every_other_outcome_its_own(caplog):
    import uuid

    from deliveries.pipeline.outcome_log import delivery_outcomes_log

    def row(pk: int, channel: str = "email") -> Delivery:
        return Delivery(pk=pk, channel=channel, notification_id=uuid.uuid4(), attempts=1)

    outcomes = [
        (row(1), "delivered", "", 3),
        (row(2), "delivered", "", 4),
        (row(3), "retrying", "", 5),
        (row(4), "failed", "rejected", 6),
        (row(5, "inapp"), "delivered", "", 0),
    ]
    with caplog.at_level(logging.INFO, logger="deliveries.outcome"):
        delivery_outcomes_log(outcomes)
    each = [r for r in caplog.records if getattr(r, "event", "") == "delivery_outcome"]
    assert [(r.delivery_id, r.status, r.levelno) for r in each] == [
        (3, "retrying", logging.INFO),
        (4, "failed", logging.INFO),
    ]
    rounds = [r for r in caplog.records if getattr(r, "event", "") == "delivery_outcomes"]
    assert [(r.channel, r.delivery_ids) for r in rounds] == [("email", [1, 2]), ("inapp", [5])]
    assert "channel=email status=delivered count=2 deliveries=1,2" in rounds[0].getMessage()

    caplog.clear()  # at DEBUG every delivered member has its own line as well
    with caplog.at_level(logging.DEBUG, logger="deliveries.outcome"):
        delivery_outcomes_log(outcomes)
    each = [r for r in caplog.records if getattr(r, "event", "") == "delivery_outcome"]
    assert sorted(r.delivery_id for r in each) == [1, 2, 3, 4, 5]
