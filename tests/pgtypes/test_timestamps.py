"""Timestamps read through psycopg's C loader keep Django's contract: the same instant,
aware, in UTC, whatever the session's time zone; and every cursor of every connection
keeps the loader (Django puts its own back on a cursor when the time zones differ)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
from django.db import DEFAULT_DB_ALIAS, connection, connections

from analytics.models import AnalyticsErasure
from pgtypes import TIMESTAMPTZ_OID, UtcTimestampLoader

pytestmark = pytest.mark.django_db

MOSCOW = timezone(timedelta(hours=3))


def loader_of_a_new_cursor(django_connection) -> type:
    with django_connection.cursor() as cursor:
        return cursor.cursor.adapters.get_loader(TIMESTAMPTZ_OID, 0)


def test_every_cursor_of_every_connection_reads_timestamps_in_c():
    assert loader_of_a_new_cursor(connection) is UtcTimestampLoader
    fresh = connections.create_connection(DEFAULT_DB_ALIAS)  # a connection just opened
    try:
        assert loader_of_a_new_cursor(fresh) is UtcTimestampLoader
    finally:
        fresh.close()


def test_a_timestamp_comes_back_the_same_instant_aware_in_utc():
    moment = datetime(2026, 3, 29, 0, 59, 59, 123456, tzinfo=MOSCOW)
    with connection.cursor() as cursor:
        cursor.execute("SELECT %s::timestamptz, '2026-12-05 23:30:00.5+00'::timestamptz", [moment])
        read, literal = cursor.fetchone()
    assert read == moment
    assert read.tzinfo is UTC
    assert read.isoformat() == "2026-03-28T21:59:59.123456+00:00"
    assert literal == datetime(2026, 12, 5, 23, 30, 0, 500000, tzinfo=UTC)


def test_another_session_time_zone_still_gives_the_instant_in_utc():
    with connection.cursor() as cursor:
        cursor.execute("SET TIME ZONE 'Asia/Tokyo'")
        try:
            cursor.execute("SELECT '2026-01-01 00:00:00+00'::timestamptz")
            (read,) = cursor.fetchone()
        finally:
            cursor.execute("SET TIME ZONE 'UTC'")
    assert read == datetime(2026, 1, 1, tzinfo=UTC)
    assert read.tzinfo is UTC


def test_the_orm_writes_and_reads_a_model_timestamp_unchanged():
    moment = datetime(2026, 7, 1, 12, 0, 0, 654321, tzinfo=MOSCOW)
    erasure = AnalyticsErasure.objects.create(person="p" * 32)
    AnalyticsErasure.objects.filter(pk=erasure.pk).update(requested_at=moment)
    read = AnalyticsErasure.objects.get(pk=erasure.pk).requested_at
    assert read == moment
    assert read.tzinfo is UTC
    just_after = moment + timedelta(microseconds=1)
    assert AnalyticsErasure.objects.filter(requested_at__lt=just_after).count() == 1
