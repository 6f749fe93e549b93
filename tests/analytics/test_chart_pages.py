"""The chart pages without a browser: what the charts are made of (many series capped,
long campaigns per day), a bad window refused before the store is read, the store away
answered 503, and the permission that opens the pages granted to no one by default."""

from __future__ import annotations

import io
from datetime import date, timedelta

import pytest
from django.contrib.auth.models import Group, Permission, User
from django.core.management import call_command
from django.utils import timezone

from analytics.charts.documents import (
    MAX_SERIES,
    campaign_sends_chart,
    categories_channels_chart,
)
from analytics.store.backend import stores_forget
from notify.models import Producer
from scripts.ports import unused_port

BASE = "/admin/analytics/deliveryreports/"


@pytest.fixture
def viewer_client(db, client):
    user = User.objects.create_user("vic", password="pw-vic", is_staff=True)
    user.user_permissions.add(
        Permission.objects.get(content_type__app_label="analytics", codename="see_reports")
    )
    client.force_login(user)
    Producer.objects.create(name="Acme")
    return client


def test_a_chart_of_many_categories_keeps_the_largest_and_sums_the_rest():
    day = date(2026, 12, 1)
    results = [
        {"day": day.isoformat(), "category": f"c{n:02d}", "channel": "email", "counts": {"sent": n}}
        for n in range(1, 16)
    ]
    chart = categories_channels_chart(results, kind="sent", start=day, end=day)
    assert len(chart.series) == MAX_SERIES
    assert [s.label for s in chart.series[:2]] == ["c15 · email", "c14 · email"]
    assert chart.series[-1].label == "all others (4)"
    assert chart.series[-1].data == [1 + 2 + 3 + 4]
    assert sum(s.data[0] for s in chart.series) == sum(range(1, 16))  # nothing lost
    assert chart.rows() == [("2026-12-01", [s.data[0] for s in chart.series])]


def test_a_campaign_over_more_than_three_days_shows_its_sends_per_day():
    rows = [("2026-12-01 10:00", "email", 5), ("2026-12-01 11:00", "email", 2)]
    rows += [("2026-12-05 09:00", "sms", 4)]
    chart = campaign_sends_chart(rows)
    assert chart.axis == "Day"
    assert chart.labels == [f"2026-12-0{n}" for n in range(1, 6)]
    assert [(s.label, s.data) for s in chart.series] == [
        ("email", [7, 0, 0, 0, 0]),
        ("sms", [0, 0, 0, 0, 4]),
    ]
    hourly = campaign_sends_chart(rows[:2])
    assert (hourly.axis, hourly.labels) == ("Hour", ["2026-12-01 10:00", "2026-12-01 11:00"])


def test_a_window_past_366_days_or_backwards_is_refused_before_the_store_is_read(viewer_client):
    today = date.today()
    for start, end in ((today - timedelta(days=366), today), (today, today - timedelta(days=1))):
        response = viewer_client.get(f"{BASE}categories/", {"start": start, "end": end})
        assert response.status_code == 200
        assert response.context["charts"] == []
        assert response.context["form"].non_field_errors()


def test_with_the_store_away_a_page_says_so_with_503(viewer_client, settings, analytics_on):
    settings.NOTIFY_ANALYTICS_READER_ADDRESS = f"127.0.0.1:{unused_port()}"  # nobody listens
    stores_forget()
    try:
        response = viewer_client.get(f"{BASE}providers/")
    finally:
        stores_forget()
    assert response.status_code == 503
    assert b"The analytics store cannot be reached" in response.content


def test_the_permission_is_granted_to_no_one_by_default(db):
    call_command("create_roles", stdout=io.StringIO())  # every role the project defines
    assert Group.objects.exists()
    permission = Permission.objects.get(content_type__app_label="analytics", codename="see_reports")
    assert not permission.user_set.exists()
    assert not Group.objects.filter(permissions=permission).exists()


@pytest.mark.e2e
def test_the_pages_read_through_the_analytics_process(transactional_db, analytics_process):
    """As deployed: the `analytics` process ships the queued events into its store and
    answers the web process's reads of the charts over its reader."""
    from django.test import Client

    from tests.analytics.conftest import queue_events, store_rows
    from tests.waiting import wait_for

    producer = Producer.objects.create(name="Acme")
    user = User.objects.create_user("vic", password="pw-vic", is_staff=True)
    user.user_permissions.add(
        Permission.objects.get(content_type__app_label="analytics", codename="see_reports")
    )
    # Three delivered, each with its `sent` in the store: seven events there.
    queue_events(3, kind="delivered", producer_id=producer.pk, latency_ms=120)
    queue_events(1, kind="failed", producer_id=producer.pk, reason="rejected")
    wait_for(
        lambda: int(store_rows("SELECT count() FROM notify_analytics.events")[0][0]) == 7,
        timeout=30,
        what="the analytics process shipped the events",
    )
    client = Client()
    client.force_login(user)
    response = client.get(f"{BASE}providers/")
    assert response.status_code == 200
    latency, rates = response.context["charts"]
    today = timezone.now().date().isoformat()  # the rollups' days are UTC days
    assert dict(zip(latency.labels, latency.series[0].data, strict=True))[today] == 120
    assert dict(zip(rates.labels, rates.series[0].data, strict=True))[today] == 25.0
