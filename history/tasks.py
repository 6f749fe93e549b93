"""Beat's history jobs; the rules are in history.partitions and history.retention."""

from __future__ import annotations

from dataclasses import asdict

from celery import shared_task
from django.conf import settings

from history.partitions import partitions_ensure
from history.retention import retention_run


@shared_task(name="history.partitions_ensure")
def partitions_ensure_task() -> list[str]:
    """Create the months ahead (and any month with rows in a default partition)."""
    return partitions_ensure()


# Exporting a big month can take longer than RabbitMQ's consumer timeout (30 min): a late
# ack would close the channel, stop the worker and run the export again. Acknowledged on
# receipt instead: a run lost with its worker is simply the next one beat sends (every
# month is one transaction, and a run finds its work again). It may take until the next
# run is due; the run lock turns an overlapping one away.
@shared_task(
    name="history.retention_run",
    acks_late=False,
    soft_time_limit=settings.NOTIFY_HISTORY_MAINTENANCE_INTERVAL,
    time_limit=settings.NOTIFY_HISTORY_MAINTENANCE_INTERVAL * 1.1,
)
def retention_run_task() -> dict:
    """Archive and drop the months past retention (docs/history.md)."""
    return asdict(retention_run())
