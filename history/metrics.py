"""What /metrics says about history: months waiting for retention or failed, archived
months with erasures still to apply, and rows stranded in a default partition. Each
should stay 0; an alert on any of them staying above 0 catches a retention that stopped."""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import GaugeMetricFamily, Metric

from history.retention import retention_status


def history_metrics() -> Iterator[Metric]:
    """The history source of /metrics (registered by HistoryConfig.ready)."""
    status = retention_status()
    months = GaugeMetricFamily(
        "notify_history_months",
        "Months of history by retention state: pending (past retention, still in the "
        "database), failed (the last archive attempt did not verify), erasure_pending "
        "(archived, with erasures still to apply to its files).",
        labels=["state"],
    )
    months.add_metric(["pending"], status.months_pending)
    months.add_metric(["failed"], status.months_failed)
    months.add_metric(["erasure_pending"], status.months_erasure_pending)
    yield months
    yield GaugeMetricFamily(
        "notify_history_default_partition_rows",
        "Rows in the history tables' default partitions (a month was missing).",
        value=status.default_partition_rows,
    )
