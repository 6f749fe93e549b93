"""Events leave PostgreSQL for the store exactly once: a batch is deleted from the queue
only when the store has it, and a batch the store took before a crash is not sent twice."""

from __future__ import annotations

import pytest
from django.db import transaction

from analytics.models import AnalyticsEvent
from analytics.store.schema import EVENTS
from analytics.store.shipper import batch_ship, shipped_reconcile
from tests.analytics.conftest import queue_events


class Crash(Exception):
    pass


def test_shipped_events_leave_the_queue_and_are_in_the_store(db, store):
    queue_events(120)
    assert batch_ship(store=store, limit=50) == 50
    assert batch_ship(store=store, limit=500) == 70
    assert batch_ship(store=store) == 0
    assert AnalyticsEvent.objects.count() == 0
    assert store.query(f"SELECT count(), uniqExact(event_id) FROM {EVENTS}") == [(120, 120)]


def test_a_batch_the_store_took_before_a_crash_is_not_shipped_twice(db, store):
    queue_events(80)
    # The store takes the batch, then the process dies before PostgreSQL commits: the
    # queue still has every event.
    with pytest.raises(Crash), transaction.atomic():
        batch_ship(store=store, limit=30)
        raise Crash
    assert AnalyticsEvent.objects.count() == 80
    assert store.query(f"SELECT count() FROM {EVENTS}") == [(30,)]

    assert shipped_reconcile(store=store) == 30
    while batch_ship(store=store, limit=25):
        pass
    assert AnalyticsEvent.objects.count() == 0
    assert store.query(f"SELECT count(), uniqExact(event_id) FROM {EVENTS}") == [(80, 80)]
