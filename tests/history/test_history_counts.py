"""What /metrics counts survives a month leaving the database: accepted notifications and
finished deliveries stay counted; a delivery that never finished stops showing as a
backlog; a restored copy of the month counts nothing twice, and once dropped again the
numbers are what they were."""

from __future__ import annotations

from datetime import timedelta

from deliveries.counts import delivery_counts, delivery_counts_fold
from deliveries.models import Delivery
from history.restore import month_restore
from history.retention import retention_run
from notify.counts import accepted_counts, accepted_counts_fold
from tests.history.conftest import months_back
from tests.history.factories import notifications_in, person


def _numbers() -> tuple[dict, dict]:
    return accepted_counts(), delivery_counts()


def test_counts_stay_through_retention_restore_and_release(db, archive, clock, settings):
    oldest = months_back(clock, 4)
    notifications_in(person("gus", email="gus@example.com", phone="+15550101"), oldest, count=2)
    # One of its deliveries never finished (queued when the month ended).
    stuck = Delivery.objects.filter(channel="sms").first()
    Delivery.objects.filter(pk=stuck.pk).update(status="queued")
    accepted_counts_fold()
    delivery_counts_fold()
    accepted, deliveries = _numbers()
    assert deliveries[("sms", "queued", 0)] == 1
    assert deliveries[("email", "delivered", 0)] == 2

    assert list(retention_run(now=clock).archived) == [f"{oldest:%Y-%m}"]

    after_accepted, after_deliveries = _numbers()
    assert after_accepted == accepted
    assert ("sms", "queued", 0) not in after_deliveries
    assert after_deliveries[("sms", "delivered", 0)] == 1
    assert after_deliveries[("email", "delivered", 0)] == 2

    month_restore(month=oldest)
    accepted_counts_fold()
    delivery_counts_fold()
    # Back in the database for support: only the unfinished one shows again, as it is.
    assert _numbers() == (after_accepted, {**after_deliveries, ("sms", "queued", 0): 1})

    later = clock + timedelta(days=settings.NOTIFY_RESTORE_KEEP_DAYS + 1)
    assert retention_run(now=later).released == [f"{oldest:%Y-%m}"]
    assert _numbers() == (after_accepted, after_deliveries)
