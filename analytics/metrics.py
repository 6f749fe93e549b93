"""What /metrics says about analytics (registered in NOTIFY_METRICS_SOURCES): how far
the store is behind, and how many events wait to be shipped. Read from PostgreSQL, so
any web process answers without reaching the store."""

from __future__ import annotations

from collections.abc import Iterator

from django.db import connection
from django.utils import timezone
from prometheus_client.core import GaugeMetricFamily, Metric

from analytics.events import queued_oldest_at
from analytics.models import AnalyticsEvent


def analytics_metrics() -> Iterator[Metric]:
    """The analytics source of /metrics."""
    table = AnalyticsEvent._meta.db_table
    oldest = queued_oldest_at()
    with connection.cursor() as cursor:
        # The planner's estimate past a million rows (an exact count would scan them all).
        cursor.execute(
            f"SELECT CASE WHEN reltuples > 1e6 THEN reltuples::bigint"
            f" ELSE (SELECT count(*) FROM {table}) END FROM pg_class WHERE oid = %s::regclass",
            [table],
        )
        backlog = cursor.fetchone()[0]
    lag = max((timezone.now() - oldest).total_seconds(), 0.0) if oldest else 0.0
    yield GaugeMetricFamily(
        "notify_analytics_lag_seconds",
        "Age of the oldest delivery event not yet in the analytics store (0: none waiting).",
        value=lag,
    )
    yield GaugeMetricFamily(
        "notify_analytics_backlog",
        "Rows of delivery events waiting to be shipped to the analytics store"
        " (a row stands for one or two events).",
        value=backlog,
    )
