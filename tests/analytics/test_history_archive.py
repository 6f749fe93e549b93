"""History past 90 days without a restore, on the real `analytics` process: a month archived
by retention is read in place from its Parquet files by the store's engine, beside the
store's events, on the support timeline and at `/v1/users/{id}/history`; only the
caller's producer's rows; after the person's erasure, none of it anywhere."""

from __future__ import annotations

import functools
import threading
from datetime import timedelta
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

import pyarrow.parquet as pq
import pytest
from django.contrib.auth import get_user_model
from rest_framework.test import APIClient

from analytics.events import person_hash
from analytics.store.archive_read import (
    LAST_ID,
    ArchivedMonthFiles,
    ArchiveNotReadable,
    archive_person_deliveries,
    archive_source,
)
from analytics.store.schema import EVENTS
from history.models import ArchivedMonth
from history.retention import retention_run
from notify.api_keys import api_key_issue
from notify.models import Notification, Producer, Recipient
from tests.analytics.conftest import queue_events, store_rows
from tests.history import conftest as history_fixtures
from tests.history.conftest import months_back
from tests.history.factories import month_day, notifications_in, person
from tests.waiting import wait_for

pytestmark = pytest.mark.e2e

# The history tests' fixtures: an archive directory of the test's own, and a clock.
archive, clock = history_fixtures.archive, history_fixtures.clock

USER_ID = "year-old-ylva"


def _events_in_store(hashed: str) -> int:
    return store_rows(f"SELECT count() FROM {EVENTS} WHERE person = {{p:String}}", {"p": hashed})[
        0
    ][0]


def _archived_rows_of(recipient_pk: int, archive_dir) -> int:
    """The rows of this recipient in every archived notifications and deliveries file, as
    pyarrow reads them (not the engine under test)."""
    found = 0
    for table in ("notify_notification", "deliveries_delivery"):
        for path in (archive_dir / table).glob("*.parquet"):
            ids = pq.read_table(path, columns=["recipient_id"]).column(0).to_pylist()
            found += ids.count(recipient_pk)
    return found


@pytest.fixture
def year_old_history(transactional_db, producer_key, archive, clock):
    """Ylva: two notifications from the caller's producer and one from another team a
    year ago (two deliveries each), their year-old events in the queue, and the month
    archived by retention and dropped from PostgreSQL."""
    ylva = person(USER_ID)
    own = producer_key.api_key.producer
    year_ago = months_back(clock, 12)
    ours = notifications_in(ylva, year_ago, count=2)
    theirs = notifications_in(ylva, year_ago, count=1)
    Notification.objects.filter(pk__in=[n.pk for n in ours]).update(producer=own)
    third = Producer.objects.get(name="history-shop")
    assert {n.producer_id for n in theirs} == {third.pk}
    at = month_day(year_ago)
    queue_events(
        2, kind="delivered", producer_id=own.pk, person=person_hash(USER_ID), occurred_at=at
    )
    queue_events(
        1, kind="opened", producer_id=third.pk, person=person_hash(USER_ID), occurred_at=at
    )

    archived = retention_run(now=clock).archived
    assert f"{year_ago:%Y-%m}" in archived
    assert not Notification.objects.filter(recipient=ylva).exists()  # the partition is gone
    assert _archived_rows_of(ylva.pk, archive) == 3 + 6
    return ylva, own, third, year_ago


def test_a_year_old_archived_month_is_on_the_timeline_and_in_history_until_erasure(
    year_old_history,
    analytics_process,
    api,
    admin_client,
    archive,
):
    ylva, own, third, year_ago = year_old_history
    assert third.pk != own.pk
    hashed = person_hash(USER_ID)
    # Two delivered, each with its try's `sent`, and one opened.
    wait_for(lambda: _events_in_store(hashed) == 5, timeout=30, what="the events shipped")

    # The API: the caller's producer's archived deliveries and events, newest first.
    before = f"{month_day(year_ago) + timedelta(days=1):%Y-%m-%dT%H:%M:%SZ}"
    response = api.get(f"/v1/users/{USER_ID}/history?before={before}")
    assert response.status_code == 200, response.content
    results = response.json()["results"]
    archived = [e for e in results if e["source"] == "archive"]
    events = [e for e in results if e["source"] == "events"]
    assert len(archived) == 4 and len(events) == 4
    assert {(e["kind"], e["status"], e["channel"]) for e in archived} == {
        ("delivery", "delivered", "email"),
        ("delivery", "delivered", "sms"),
    }
    assert {e["category"] for e in archived} == {"order.shipped"}
    assert all(e["occurred_at"].startswith(year_ago.isoformat()[:7]) for e in results)
    # Paged by cursor through both sources, nothing twice, nothing lost.
    seen, cursor = [], None
    while True:
        query = f"cursor={cursor}" if cursor else f"before={before}"
        page = api.get(f"/v1/users/{USER_ID}/history?limit=4&{query}").json()
        seen += [(e["source"], e["delivery_id"], e["kind"]) for e in page["results"]]
        if not (cursor := page["next_cursor"]):
            break
    assert sorted(seen) == sorted((e["source"], e["delivery_id"], e["kind"]) for e in results)

    # Another team's key: nothing of this person's history, archived or not.
    other = APIClient()
    other_key = api_key_issue(producer_name="other", scopes=["users:read"]).key
    other.credentials(HTTP_AUTHORIZATION=f"Bearer {other_key}")
    assert other.get(f"/v1/users/{USER_ID}/history?before={before}").json()["results"] == []

    # Support's timeline links to the older history, which has every producer's.
    timeline = admin_client.get(f"/admin/notify/recipient/{ylva.pk}/change/")
    assert b'id="older-history-link"' in timeline.content
    older = admin_client.get(f"/admin/history/archivedmonth/person/{ylva.pk}/")
    assert older.status_code == 200
    text = older.content.decode()
    assert text.count('data-source="archive"') == 6
    assert text.count('data-source="events"') == 5
    assert "history-shop" in text and own.name in text

    # Erased through the API: gone from /history, the timeline, the store and the archive.
    assert api.delete(f"/v1/users/{USER_ID}").status_code in (200, 202, 204)
    assert not Recipient.objects.filter(user_id=USER_ID).exists()
    wait_for(lambda: _events_in_store(hashed) == 0, timeout=30, what="the store's erasure")
    assert _archived_rows_of(ylva.pk, archive) == 0
    assert api.get(f"/v1/users/{USER_ID}/history?before={before}").json()["results"] == []
    assert admin_client.get(f"/admin/history/archivedmonth/person/{ylva.pk}/").status_code == 404
    # The engine itself finds none of the recipient's rows in the rewritten files.
    record = ArchivedMonth.objects.get(month=year_ago)
    url = record.files["notify_notification"]["url"]
    function, where = archive_source(url)
    rows = store_rows(
        f"SELECT count() FROM {function}({{f:String}}, 'Parquet', 'recipient_id Nullable(Int64)')"
        " WHERE recipient_id = {r:Int64}",
        {"f": where, "r": ylva.pk},
    )
    assert rows == [(0,)]


@pytest.mark.parametrize(
    ("url", "function"),
    [
        ("/srv/archive/notify_notification/2025-01.parquet", "file"),
        ("file:///srv/archive/notify_notification/2025-01.parquet", "file"),
        ("https://archive.example.org/n/2025-01.parquet", "url"),
        ("s3://bucket/notify/notify_notification/2025-01.parquet", "s3"),
    ],
)
def test_each_readable_archive_url_kind_has_its_table_function(url, function):
    assert archive_source(url)[0] == function


@pytest.mark.parametrize(
    "url", ["memory://archive/x.parquet", "gcs://b/x.parquet", "/srv/arch*/x.parquet"]
)
def test_an_archive_url_the_engine_cannot_read_in_place_is_refused(url):
    with pytest.raises(ArchiveNotReadable):
        archive_source(url)


@pytest.fixture
def archive_over_http(archive):
    """The archive directory served over HTTP on a free local port; yields its base URL."""
    handler = functools.partial(SimpleHTTPRequestHandler, directory=str(archive))
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def test_an_archive_over_http_is_read_in_place_through_url(
    db,
    store,
    archive,
    archive_over_http,
    clock,
):
    ylva, finn = person("http-ylva"), person("http-finn")
    year_ago = months_back(clock, 12)
    notifications_in(ylva, year_ago, count=1)
    notifications_in(finn, year_ago, count=1)
    retention_run(now=clock)
    record = ArchivedMonth.objects.get(month=year_ago)
    served = {
        table: entry["url"].replace(str(archive), archive_over_http)
        for table, entry in record.files.items()
    }
    assert served["deliveries_delivery"].startswith("http://")

    found = archive_person_deliveries(
        store=store,
        months=[
            ArchivedMonthFiles(
                month=f"{year_ago:%Y-%m}",
                notifications_url=served["notify_notification"],
                deliveries_url=served["deliveries_delivery"],
            )
        ],
        recipient_pk=ylva.pk,
        producer_id=None,
        before=clock,
        before_id=LAST_ID,
        limit=10,
    )
    assert sorted(e["channel"] for e in found) == ["email", "sms"]
    assert {e["status"] for e in found} == {"delivered"}


def test_older_history_is_refused_to_staff_who_may_not_view_recipients(db, client):
    ylva = person("private-ylva")
    staff = get_user_model().objects.create_user("marketer", password="x", is_staff=True)
    client.force_login(staff)
    assert client.get(f"/admin/history/archivedmonth/person/{ylva.pk}/").status_code == 403
