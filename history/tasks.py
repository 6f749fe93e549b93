"""Beat's history jobs; the rules are in history.partitions and history.retention."""

from __future__ import annotations

from celery import shared_task

from history.partitions import partitions_ensure


@shared_task(name="history.partitions_ensure")
def partitions_ensure_task() -> list[str]:
    """Create the months ahead (and any month with rows in a default partition)."""
    return partitions_ensure()
