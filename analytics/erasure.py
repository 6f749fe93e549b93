"""Erasing a person from analytics: their queued events now, the store's rows next."""

from __future__ import annotations

from analytics.events import person_hash
from analytics.models import AnalyticsErasure, AnalyticsEvent


def analytics_person_erase(*, user_id: str) -> dict[str, int]:
    """Delete the person's events still queued in PostgreSQL and queue the deletion of
    their rows in the store (the `analytics` process, its only writer, applies it before
    its next batch). In the caller's transaction; what was removed, for the ledger.

    The store never holds the user id, only a keyed hash of it (`person_hash`), and the
    rollups hold no person at all: counts stay, the person does not."""
    person = person_hash(user_id)
    queued, _ = AnalyticsEvent.objects.filter(person=person).delete()
    AnalyticsErasure.objects.create(person=person)
    return {"analytics_events_queued": queued}
