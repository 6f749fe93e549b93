"""Bring the flow room's per-process state back to a fresh process's (tests only)."""

from __future__ import annotations

from flow import pace, senders
from flow.line_lease import line_record_forget


def channel_senders_reset() -> None:
    """Forget every slot, line and provider average, as a new worker process starts."""
    with senders._lock:
        senders._lanes.clear()
        senders._closing.clear()
    with pace._lock:
        pace._latency.clear()
        pace._calls.clear()
    line_record_forget()
