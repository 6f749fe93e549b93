"""Helpers for campaign tests: recipients seeded set-based (bulk_create), with marketing
consent and no quiet hours unless a test asks otherwise."""

from __future__ import annotations

from datetime import UTC, datetime, time

import pytest

PROMO = {"headline": "Winter sale", "url": "https://shop.example/sale"}


def campaign_body(**overrides) -> dict:
    """A `POST /v1/campaigns` body: the promo to everybody, unless overridden."""
    return {
        "name": "Winter sale",
        "category": "promo.weekly",
        "payload": PROMO,
        "audience": {"all": True},
        **overrides,
    }


NOON_UTC = datetime(2026, 1, 10, 12, 0, tzinfo=UTC)  # outside the default quiet window


def seed_recipients(
    count: int,
    *,
    prefix: str = "c",
    consent: bool = True,
    quiet: bool = False,
    **fields: str,
) -> list:
    """`count` recipients `<prefix>-00000`…, with consent to all marketing on every channel
    (unless `consent=False`) and a zero-length quiet window (unless `quiet=True`)."""
    from notify.models import Recipient
    from preferences.models import ConsentRecord, ConsentSource, QuietHours

    fields.setdefault("timezone", "UTC")
    fields.setdefault("locale", "en")
    recipients = Recipient.objects.bulk_create(
        [
            Recipient(user_id=f"{prefix}-{i:05d}", email=f"{prefix}-{i:05d}@example.com", **fields)
            for i in range(count)
        ]
    )
    if consent:
        ConsentRecord.objects.bulk_create(
            [
                ConsentRecord(
                    recipient=r,
                    category=None,
                    granted=True,
                    source=ConsentSource.SIGNUP,
                    text_version="signup-2026-01",
                )
                for r in recipients
            ]
        )
    if not quiet:
        QuietHours.objects.bulk_create(
            [QuietHours(recipient=r, start=time(0, 0), end=time(0, 0)) for r in recipients]
        )
    return recipients


def orders_team_client():
    """An API client of another team: its key may launch campaigns, but only of
    `order.shipped`."""
    from rest_framework.test import APIClient

    from notify.api_keys import api_key_issue

    client = APIClient()
    key = api_key_issue(
        producer_name="orders", category_keys=["order.shipped"], scopes=["campaigns:write"]
    ).key
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")
    return client


def email_only_category():
    """A marketing category on email alone, so a member's status is its email's."""
    from notify.models import Category, QueueClass

    promo = Category.objects.get(key="promo.weekly")
    category, _ = Category.objects.get_or_create(
        key="promo.mail",
        defaults={
            "queue": QueueClass.LOW,
            "marketing": True,
            "default_channels": ["email"],
            "payload_schema": promo.payload_schema,
        },
    )
    return category


def launch(
    category_key: str = "promo.weekly",
    *,
    audience_kind: str = "all",
    spec=None,
    producer_name: str = "shop",
    send_at=None,
):
    """A running campaign, stored as the API would store it (no task is published: the
    test calls the fan-out itself)."""
    from campaigns.fanout import campaign_launch
    from notify.models import Category, Producer

    producer, _ = Producer.objects.get_or_create(name=producer_name)
    return campaign_launch(
        name="Winter sale",
        category=Category.objects.get(key=category_key),
        payload=PROMO,
        audience_kind=audience_kind,
        audience_spec=spec or {},
        producer=producer,
        send_at=send_at,
    )


def fan_out_all(campaign, *, batch_size: int | None = None) -> int:
    """Run the fan-out batch after batch, as the chained task would; returns how many
    batches ran (the last one finds fewer than a batch, possibly none)."""
    from campaigns.fanout import campaign_fan_out

    batches = 1
    while campaign_fan_out(campaign_id=campaign.pk, batch_size=batch_size).more:
        batches += 1
    campaign.refresh_from_db()
    return batches


def campaign_notifications(campaign):
    from notify.models import Notification

    return Notification.objects.filter(
        producer_id=campaign.producer_id, event_id__startswith=campaign.event_id_prefix
    )


@pytest.fixture
def promo_data(demo_data):
    """The demo categories and templates (promo.weekly is the marketing one), without the
    demo recipients, so an audience is exactly what a test seeds."""
    from notify.models import Recipient

    Recipient.objects.filter(user_id__startswith="demo-user").delete()
    return demo_data
