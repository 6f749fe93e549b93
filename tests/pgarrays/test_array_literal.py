"""Array literals reach PostgreSQL as the values they were written from: the hot
statements bind whole columns this way."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
from django.db import connection

from pgarrays import DATETIME_MEMO_FROM, array_literal, planned_once

pytestmark = pytest.mark.django_db

MOSCOW = timezone(timedelta(hours=3))


def as_postgres_reads_it(values: list, cast: str) -> list:
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT %s::{cast}", [array_literal(values)])
        return cursor.fetchone()[0]


@pytest.mark.parametrize("size", [3, DATETIME_MEMO_FROM, 4 * DATETIME_MEMO_FROM])
def test_a_datetime_column_of_repeats_distinct_values_and_nulls_reads_back_exactly(size):
    now = datetime(2026, 12, 5, 19, 0, 0, 123456, tzinfo=UTC)
    values = [
        None if i % 7 == 3 else now if i % 2 else now + timedelta(microseconds=i)
        for i in range(size)
    ]
    assert as_postgres_reads_it(values, "timestamptz[]") == values


def test_a_long_column_of_one_instant_in_two_zones_reads_back_as_that_instant():
    instant = datetime(2026, 12, 5, 19, 0, tzinfo=UTC)
    values = [instant, instant.astimezone(MOSCOW)] * DATETIME_MEMO_FROM
    assert as_postgres_reads_it(values, "timestamptz[]") == [instant] * len(values)


def test_texts_with_quotes_backslashes_and_the_word_null_stay_text():
    values = ['say "hi"', "back\\slash", "NULL", "", "a,b", None] * 3
    assert as_postgres_reads_it(values, "text[]") == values


def test_planned_once_hides_every_array_parameters_length_once_and_keeps_scalars():
    sql = (
        "SELECT * FROM unnest(%(ids)s::bigint[], %(codes)s::varchar(32)[]) v"
        " WHERE v.at <= %(now)s AND v.id = ANY(%(ids)s::bigint[])"
    )
    hidden = planned_once(sql)
    assert hidden == (
        "SELECT * FROM unnest((SELECT %(ids)s::bigint[])::bigint[],"
        " (SELECT %(codes)s::varchar(32)[])::varchar(32)[]) v"
        " WHERE v.at <= %(now)s AND v.id = ANY((SELECT %(ids)s::bigint[])::bigint[])"
    )
    assert planned_once(hidden) == hidden
    with connection.cursor() as cursor:  # and PostgreSQL reads it as before
        cursor.execute(
            planned_once("SELECT 2 = ANY(%(ids)s::bigint[]), cardinality(%(ids)s::bigint[])"),
            {"ids": array_literal([1, 2, 3])},
        )
        assert cursor.fetchone() == (True, 3)
