"""Where analytics hooks into the apps below it (this module stands above them all)."""

from __future__ import annotations


def analytics_listen() -> None:
    """Hear every pipeline round's changes (analytics.events writes their events), and
    ride in the rounds that offer it."""
    from analytics.events import analytics_events_ride, analytics_events_write
    from deliveries.changes import change_listener_add, change_rider_add

    change_listener_add(analytics_events_write)
    change_rider_add(analytics_events_ride)
