"""Events leave PostgreSQL for the store exactly once: a batch is deleted from the queue
only when the store has it, and a batch the store took before a crash is not sent twice."""

from __future__ import annotations

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from analytics.models import AnalyticsEvent
from analytics.store.schema import EVENTS
from analytics.store.shipper import batch_ship, shipped_reconcile
from tests.analytics.conftest import queue_events


class Crash(Exception):
    pass


def test_shipped_events_leave_the_queue_and_are_in_the_store(db, store):
    queue_events(120, kind="accepted")
    assert batch_ship(store=store, limit=50) == 50
    assert batch_ship(store=store, limit=500) == 70
    assert batch_ship(store=store) == 0
    assert AnalyticsEvent.objects.count() == 0
    assert store.query(f"SELECT count(), uniqExact(event_id) FROM {EVENTS}") == [(120, 120)]


def test_events_ship_with_the_debug_cursor_as_under_make_run(db, store):
    # DJANGO_DEBUG (make run) wraps every cursor in Django's debug wrapper, whose copy()
    # takes no parameters; capturing queries forces the same wrapper here.
    queue_events(30, kind="accepted")
    with CaptureQueriesContext(connection):
        assert batch_ship(store=store) == 30
    assert store.query(f"SELECT count() FROM {EVENTS}") == [(30,)]


def test_a_batch_the_store_took_before_a_crash_is_not_shipped_twice(db, store):
    queue_events(20, kind="accepted")
    # The route's pairs: each is two `accepted` events in the store (two deliveries).
    queue_events(20, kind="accepted", pair_delivery_id=2, pair_channel="inapp",
                 pair_provider="inapp")  # fmt: skip
    queue_events(40)  # delivered: each is two events in the store (with its `sent`)
    # The store takes the batch, then the process dies before PostgreSQL commits: the
    # queue still has every event.
    with pytest.raises(Crash), transaction.atomic():
        batch_ship(store=store, limit=50)
        raise Crash
    assert AnalyticsEvent.objects.count() == 80
    assert store.query(f"SELECT count() FROM {EVENTS}") == [(80,)]

    assert shipped_reconcile(store=store) == 50
    while batch_ship(store=store, limit=25):
        pass
    assert AnalyticsEvent.objects.count() == 0
    assert store.query(f"SELECT count(), uniqExact(event_id) FROM {EVENTS}") == [(140, 140)]


def test_a_queued_delivered_reaches_the_store_with_its_tries_sent(db, store):
    [delivered] = queue_events(1, provider="postmark", latency_ms=250, delivery_id=7)
    queue_events(1, kind="sent", delivery_id=8, latency_ms=None)  # a try to be retried
    batch_ship(store=store)
    rows = store.query(
        f"SELECT event_id, kind, provider, delivery_id, person, latency_ms FROM {EVENTS}"
        " ORDER BY delivery_id, kind"
    )
    person = delivered.person
    assert rows == [
        (delivered.pk * 2 + 1, "delivered", "postmark", 7, person, 250),
        (delivered.pk * 2, "sent", "postmark", 7, person, -1),
        ((delivered.pk + 1) * 2 + 1, "sent", "smtp", 8, person, -1),
    ]


class StoreFailingMidBatch:
    """The store, going away after it was handed the first bytes of a batch."""

    def __init__(self, store) -> None:
        self.store = store

    def insert_csv(self, table, columns, chunks) -> None:
        def first_then_gone():
            yield next(iter(chunks))
            raise ConnectionError("the store went away mid-batch")

        self.store.insert_csv(table, columns, first_then_gone())


def test_a_batch_the_store_failed_to_take_midway_stays_queued_and_ships_once(db, store):
    queue_events(
        20_000, kind="accepted"
    )  # many COPY chunks: the store has parsed some when it fails
    with pytest.raises(ConnectionError):
        batch_ship(store=StoreFailingMidBatch(store))
    assert AnalyticsEvent.objects.count() == 20_000
    assert store.query(f"SELECT count() FROM {EVENTS}") == [(0,)]

    assert shipped_reconcile(store=store) == 0
    assert batch_ship(store=store) == 20_000
    assert store.query(f"SELECT count(), uniqExact(event_id) FROM {EVENTS}") == [(20_000, 20_000)]


def test_the_store_keeps_an_events_time_to_the_millisecond_in_utc(db, store):
    from datetime import UTC, datetime, timedelta, timezone

    berlin = timezone(timedelta(hours=1))
    at = {"kind": "accepted"}
    queue_events(1, occurred_at=datetime(2026, 12, 31, 23, 59, 59, 999_999, tzinfo=UTC), **at)
    queue_events(1, occurred_at=datetime(2026, 12, 5, 6, 23, 1, 123_456, tzinfo=berlin), **at)
    queue_events(1, occurred_at=datetime(2026, 12, 5, 5, 23, 1, tzinfo=UTC), **at)
    batch_ship(store=store)
    rows = store.query(f"SELECT toString(occurred_at) FROM {EVENTS} ORDER BY event_id")
    assert rows == [
        ("2026-12-31 23:59:59.999",),  # cut, not rounded: still the day it happened
        ("2026-12-05 05:23:01.123",),
        ("2026-12-05 05:23:01.000",),
    ]


def _ship_one_round(store, waits: list) -> None:
    """One round of the shipper as its command runs it, its yield's sleeps recorded in
    `waits` as (seconds, events still queued then)."""
    from analytics.management.commands.analytics_ship import campaign_turn
    from analytics.store.shipper import ship_forever

    rounds = iter([False, True])
    ship_forever(
        store=store,
        should_stop=lambda: next(rounds),
        sleep=lambda seconds: None,
        turn=lambda: campaign_turn(
            sleep=lambda seconds: waits.append((seconds, AnalyticsEvent.objects.count()))
        ),
    )


def test_a_shipping_round_waits_while_login_codes_are_in_flight(db, store, fresh):
    from django_redis import get_redis_connection

    from flow import priority

    redis = get_redis_connection("default")
    queue_events(25, kind="accepted")
    priority.high_work_mark()  # a login code accepted on this host
    redis.pexpire(priority.busy_key(), 60_000)  # and in flight for the whole round
    waits: list[tuple[float, int]] = []
    _ship_one_round(store, waits)
    # The round waited the bound with every event still queued, and only then shipped;
    # it gave its campaign turn back after.
    assert waits == [(0.5, 25)]
    assert AnalyticsEvent.objects.count() == 0
    assert store.query(f"SELECT count() FROM {EVENTS}") == [(25,)]
    assert all(redis.get(key) in (None, b"resting") for key in priority.turn_keys())


def test_a_shipping_round_goes_at_once_when_no_login_code_is_in_flight(db, store, fresh):
    queue_events(10, kind="accepted")
    waits: list[tuple[float, int]] = []
    _ship_one_round(store, waits)
    assert waits == []
    assert store.query(f"SELECT count() FROM {EVENTS}") == [(10,)]
