"""Celery tasks for campaigns: thin wrappers that pass ids to services."""

from __future__ import annotations

from celery import Task, shared_task

from campaigns.fanout import campaign_fan_out, campaigns_start_due


@shared_task(name="campaigns.fan_out", bind=True)
def fan_out(self: Task, campaign_id: int, checkpoint: int | None = None) -> int:
    """One batch of the campaign's fan-out (the next is published after commit)."""
    redelivered = bool((self.request.delivery_info or {}).get("redelivered"))
    return campaign_fan_out(
        campaign_id=campaign_id, checkpoint=checkpoint, redelivered=redelivered
    ).created


@shared_task(name="campaigns.start_due")
def start_due() -> int:
    """Beat: start scheduled campaigns that are due; recover stalled fan-outs."""
    return len(campaigns_start_due())
