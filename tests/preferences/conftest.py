"""Helpers for the gate's tests: recipients with consent and no quiet hours unless a
test asks for them, so results never depend on the hour the suite runs at."""

from __future__ import annotations

import uuid
from datetime import time

import pytest


def register(api, user_id: str, *, quiet: bool = False, **fields) -> None:
    from notify.models import Recipient
    from preferences.models import QuietHours

    fields.setdefault("email", f"{user_id}@example.com")
    response = api.put(f"/v1/users/{user_id}", fields, format="json")
    assert response.status_code in (200, 201), response.content
    if not quiet:  # a window of zero length: no quiet hours
        QuietHours.objects.update_or_create(
            recipient=Recipient.objects.get(user_id=user_id),
            defaults={"start": time(0, 0), "end": time(0, 0)},
        )


def signup_consent(api, user_id: str, channels=("inapp", "email")) -> None:
    body = {
        "categories": {"promo.weekly": {channel: True for channel in channels}},
        "source": "signup",
        "consent_text_version": "signup-2026-01",
    }
    response = api.put(f"/v1/users/{user_id}/preferences", body, format="json")
    assert response.status_code == 200, response.content


def post_event(api, *, user_id: str, category: str, payload: dict, **extra) -> str:
    body = {"event_id": str(uuid.uuid4()), "user_id": user_id, "category": category,
            "payload": payload, **extra}  # fmt: skip
    response = api.post("/v1/notifications", body, format="json")
    assert response.status_code == 202, response.content
    return response.json()["notification_id"]


PROMO = {"headline": "Winter sale", "url": "https://shop.example/sale"}
LOGIN = {"code": "482913"}


@pytest.fixture
def anon_client():
    """A browser or mail client with no cookies and no credentials."""
    from django.test import Client

    return Client(enforce_csrf_checks=True)


@pytest.fixture
def mail(smtp, settings):
    """In-process sends go to the SMTP peer over the real SMTP backend."""
    from deliveries.channels.email import kept_session_close

    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST, settings.EMAIL_PORT = "127.0.0.1", smtp.port
    settings.NOTIFY_CHANNELS_ENABLED = ["inapp", "email"]
    yield smtp
    kept_session_close()
