"""Producers in admin: each one's quotas (its own or the settings' default), its use of
them today read from Redis ("unavailable" when Redis is down), and the quotas edited."""

from __future__ import annotations

import pytest

from notify.models import Producer
from tests.notify.intake.test_rate_limits import redis_down  # noqa: F401 - a fixture used below
from tests.notify.producers.test_producer_quotas import (  # noqa: F401 - person: a fixture used below
    client_of,
    event,
    person,
    send_batch,
    statuses,
)

pytestmark = pytest.mark.django_db

CHANGELIST = "/admin/notify/producer/"


def row_of(page: str, name: str) -> str:
    """The change list's row of producer `name`, as HTML."""
    start = page.index(f">{name}</a>")
    return page[start : page.index("</tr>", start)]


def test_the_producer_list_shows_quotas_and_use_today(admin_client, person, settings):  # noqa: F811
    settings.NOTIFY_PRODUCER_CAMPAIGN_EVENTS_PER_DAY = 500
    shop = client_of("quota-shop", events_per_minute=100, events_per_day=1000)
    send_batch(shop, [event() for _ in range(7)])
    client_of("plain-shop")
    page = admin_client.get(CHANGELIST).content.decode()
    shop_row = row_of(page, "quota-shop")
    assert ">100<" in shop_row and ">7 of 1000<" in shop_row
    assert "500 (default)" in shop_row and ">0 of 500<" in shop_row
    plain_row = row_of(page, "plain-shop")
    assert ">none<" in plain_row and "not counted (no quota)" in plain_row


def test_the_producer_page_edits_quotas_and_shows_use_today(admin_client, person):  # noqa: F811
    shop = client_of("quota-shop", events_per_day=1000)
    send_batch(shop, [event() for _ in range(3)])
    producer = Producer.objects.get(name="quota-shop")
    url = f"{CHANGELIST}{producer.pk}/change/"
    assert "3 of 1000" in admin_client.get(url).content.decode()
    form = {
        "name": "quota-shop",
        "events_per_minute": "2",
        "events_per_day": "",
        "campaign_events_per_day": "50",
    }
    assert admin_client.post(url, form).status_code == 302
    producer.refresh_from_db()
    assert (producer.events_per_minute, producer.events_per_day) == (2, None)
    assert producer.campaign_events_per_day == 50
    # The new quota applies to the producer's keys at once here (no auth cache in tests).
    assert statuses(send_batch(shop, [event() for _ in range(3)])) == [202, 202, 429]


def test_use_today_is_unavailable_when_redis_is_down(admin_client, person, redis_down):  # noqa: F811
    client_of("quota-shop", events_per_day=1000)
    page = admin_client.get(CHANGELIST).content.decode()
    assert ">unavailable<" in row_of(page, "quota-shop")
    producer = Producer.objects.get(name="quota-shop")
    assert "unavailable" in admin_client.get(f"{CHANGELIST}{producer.pk}/change/").content.decode()
