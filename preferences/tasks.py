"""Celery tasks for preferences: thin wrappers over services."""

from __future__ import annotations

from celery import shared_task

from preferences.services import deferred_release


@shared_task(name="preferences.release_deferred")
def release_deferred() -> int:
    """Beat: deliveries deferred by quiet hours pass the gate again once the window ends."""
    return deferred_release()
