"""A hot statement is prepared at its first run on a connection; any other statement
waits for the connection's threshold, as before."""

from __future__ import annotations

import pytest
from django.db import connection

from pgarrays import planned_once

pytestmark = pytest.mark.django_db


def prepared(marker: str) -> list[tuple[int, int]]:
    """(generic, custom) plans of this connection's prepared statements naming `marker`."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT generic_plans, custom_plans FROM pg_prepared_statements"
            " WHERE statement LIKE %s",
            [f"%{marker}%"],
        )
        return cursor.fetchall()


def test_a_hot_statement_is_prepared_at_its_first_run_and_an_ordinary_one_is_not():
    hot = planned_once("SELECT cardinality(%(ids)s::bigint[]) AS hot_first_run_probe")
    with connection.cursor() as cursor:
        cursor.execute(hot, {"ids": "{1,2}"})
        assert cursor.fetchone() == (2,)
        cursor.execute("SELECT %s::int AS ordinary_first_run_probe", [7])
        assert cursor.fetchone() == (7,)
    assert prepared("hot_first_run_probe") == [(0, 1)]
    assert prepared("ordinary_first_run_probe") == []


def test_a_hot_statement_keeps_being_hot_when_joined_to_ordinary_text():
    # A plain `+` gives back an ordinary str, which the cursor does not prepare early:
    # a statement put together at run time must be marked again (as record_sql is).
    hot = planned_once("SELECT 1 AS joined_probe")
    assert type(hot + " ") is str
