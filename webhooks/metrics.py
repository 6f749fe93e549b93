"""What /metrics says about status webhooks: events dropped from a disabled endpoint's
backlog (registered in NOTIFY_METRICS_SOURCES; read from Redis)."""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily, Metric

from webhooks.backlog import backlog_drops


def webhook_metrics() -> Iterator[Metric]:
    """The webhooks source of /metrics."""
    dropped = CounterMetricFamily(
        "notify_webhook_backlog_dropped",
        "Status webhook events dropped from a disabled endpoint's backlog (over "
        "NOTIFY_WEBHOOK_DISABLED_BACKLOG_MAX, or older than NOTIFY_RETENTION_DAYS), per endpoint.",
        labels=["endpoint"],
    )
    for endpoint, count in backlog_drops().items():
        dropped.add_metric([endpoint], count)
    yield dropped
