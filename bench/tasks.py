"""The baseline task for S2: a Celery task that does nothing, drained by the same
worker command as the pipeline (found by autodiscovery under bench.settings)."""

from __future__ import annotations

from celery import shared_task

NOOP_TASK = "bench.noop"


@shared_task(name=NOOP_TASK)
def noop() -> None:
    """Nothing: what is left is Celery's own cost per message."""
