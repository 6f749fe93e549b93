"""What analytics adds to the pipeline's cost: one statement for the route's round,
whatever the batch's size, and none for a sender's round (its events ride in its record
statement); none at all when off."""

from __future__ import annotations

from collections import Counter

from analytics.models import AnalyticsEvent
from tests.deliveries.pipeline.test_costs import PUSH_PEOPLE, one_round, push_batch_costs


def _fcm_devices(prefix: str) -> dict[str, dict]:
    return {
        f"{prefix}-{n}": {
            "kind": "fcm",
            "installation_id": f"{prefix}-{n}",
            "token": f"t-{prefix}-{n}",
        }
        for n in range(PUSH_PEOPLE)
    }


def _analytics_statements(statements: list[str]) -> list[str]:
    return [s for s in statements if AnalyticsEvent._meta.db_table in s]


def test_a_routed_and_sent_batch_writes_its_events_in_one_statement_per_round(
    demo_data, quiet_broker, fcm_peer, clean_breakers, settings
):
    one_round(settings)
    settings.NOTIFY_ANALYTICS_ENABLED = False
    off, _ = push_batch_costs("fcm", _fcm_devices("off"), quiet_broker)
    assert _analytics_statements(off) == []
    assert not AnalyticsEvent.objects.exists()

    settings.NOTIFY_ANALYTICS_ENABLED = True
    on, _ = push_batch_costs("fcm", _fcm_devices("on"), quiet_broker)
    # The route's round writes its events in one INSERT, for the whole batch; the
    # sender's round writes them inside its record statement (they ride along).
    [route_insert, record] = _analytics_statements(on)
    assert route_insert.lstrip().startswith("INSERT INTO")
    assert "WITH attempt AS" in record
    # One statement more than with analytics off, the route's (the first batch also
    # warmed this process's caches).
    assert len(on) - 1 <= len(off)
    kinds = Counter(AnalyticsEvent.objects.values_list("kind", flat=True))
    # A delivered try's row stands for its `sent` too (the shipper writes both).
    assert kinds == {"accepted": PUSH_PEOPLE, "delivered": PUSH_PEOPLE}
    event = AnalyticsEvent.objects.filter(kind="delivered").first()
    assert (event.channel, event.provider, event.category) == ("fcm", "fcm", "order.shipped")
    assert event.latency_ms is not None and event.latency_ms >= 0
    assert len(event.person) == 32 and not event.person.startswith("on-")
