"""Every row the pipeline writes or updates pays for each index of its table, so the hot
tables carry no index that another index of theirs already gives."""

from __future__ import annotations

import pytest
from django.db import connection

HOT_TABLES = (
    "notify_notification",
    "notify_eventkey",
    "notify_outbox",
    "notify_feedentry",
    "deliveries_delivery",
    "deliveries_deliveryattempt",
    "deliveries_providerevent",  # every receipt, open and click writes one
)

# Each index's table and name, whether it is unique, whether it is partial, and its
# columns in order with their operator classes. A plain index (neither unique nor partial)
# is given by another, not partial, that leads with the same columns and classes.
INDEXES_SQL = """
    SELECT t.relname, i.relname, ix.indisunique, ix.indpred IS NOT NULL,
           array(SELECT a.attname || ' ' || oc.opcname
                   FROM unnest(ix.indkey, ix.indclass) WITH ORDINALITY AS k(num, cls, pos)
                   JOIN pg_attribute a ON a.attrelid = t.oid AND a.attnum = k.num
                   JOIN pg_opclass oc ON oc.oid = k.cls
                  ORDER BY k.pos)
      FROM pg_index ix
      JOIN pg_class i ON i.oid = ix.indexrelid
      JOIN pg_class t ON t.oid = ix.indrelid
     WHERE t.relname = ANY(%s)
"""


def hot_indexes() -> list[tuple[str, str, bool, bool, list[str]]]:
    """(table, index, unique, partial, columns with their classes) of the hot tables."""
    with connection.cursor() as cursor:
        cursor.execute(INDEXES_SQL, [list(HOT_TABLES)])
        return cursor.fetchall()


@pytest.mark.django_db
def test_no_plain_index_of_a_hot_table_is_the_leading_part_of_another():
    indexes = hot_indexes()
    assert {table for table, *_ in indexes} == set(HOT_TABLES)
    redundant = [
        (name, other)
        for table, name, unique, partial, columns in indexes
        if not unique and not partial
        for other_table, other, _, other_partial, other_columns in indexes
        if other_table == table
        and other != name
        and not other_partial
        and other_columns[: len(columns)] == columns
    ]
    assert redundant == []


@pytest.mark.django_db
def test_no_hot_column_has_two_plain_indexes_that_differ_only_in_operator_class():
    """A pattern-ops B-tree (varchar_pattern_ops) serves equality as well as a prefix
    match, so a plain B-tree of the default class on the same column beside it is an
    index entry more for every row version, serving nothing the other does not."""
    plain = [
        (table, name, [column.split()[0] for column in columns])
        for table, name, unique, partial, columns in hot_indexes()
        if not unique and not partial
    ]
    twins = [
        (name, other)
        for table, name, columns in plain
        for other_table, other, other_columns in plain
        if other_table == table and name < other and other_columns == columns
    ]
    assert twins == []
