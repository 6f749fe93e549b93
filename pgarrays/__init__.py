"""Array parameters for the hot statements, written as PostgreSQL array literals.

A batch's statements bind one array per column (`%s::bigint[]`, `unnest(...)`), so the
text of a statement is the same for any number of rows. Handed a Python list, the driver
builds the array element by element in Python — several calls per element, and the
largest share of a route's CPU in the worker. Handed the literal `{1,2,3}` as one string,
it sends that text as it is, and PostgreSQL parses the elements (in C) when the statement
casts it to its type. `array_literal` picks one writer per column, from its values' type,
and writes the whole column in a few C-level calls.

The statement must cast each such parameter to its array type (`%(ids)s::bigint[]`): the
literal is text until then.

`planned_once` writes each such parameter as a scalar subquery, so that PostgreSQL plans
a hot statement once per connection, whatever its batch's size (see there).
"""

from __future__ import annotations

import datetime
import decimal
import re
import uuid
from collections.abc import Callable, Iterable
from typing import Any


def _quoted(text: str) -> str:
    # Inside double quotes, only a backslash and a double quote need escaping; quoting
    # every text element keeps an empty string, spaces, commas, braces and the word
    # NULL what they are.
    if "\\" in text or '"' in text:
        text = text.replace("\\", "\\\\").replace('"', '\\"')
    return f'"{text}"'


def _texts(values: list[str]) -> str:
    # One join quotes them all; only when an element holds a quote or a backslash does
    # each go through `_quoted`. (A str subclass, such as text choices, joins as its
    # plain value.)
    joined = '","'.join(values)
    if "\\" in joined or joined.count('"') != 2 * (len(values) - 1):
        return ",".join(map(_quoted, map(str.__str__, values)))
    return f'"{joined}"'


# Columns at least this long are written through a memo of their distinct values.
DATETIME_MEMO_FROM = 16


def _datetimes(values: list[datetime.datetime]) -> str:
    # An aware datetime's isoformat costs about a microsecond, and a batch's datetime
    # columns mostly repeat a few values (one `now`, a fan-out's one creation time):
    # each distinct value is written once. When all differ, the memo costs about a
    # tenth more than writing each. Equal instants in two zones are written as one: the
    # statements cast these columns to timestamptz.
    if len(values) < DATETIME_MEMO_FROM:
        return ",".join(map(datetime.datetime.isoformat, values))
    written = {value: value.isoformat() for value in set(values)}
    return ",".join(map(written.__getitem__, values))


def _booleans(values: list[bool]) -> str:
    return ",".join(["t" if value else "f" for value in values])


# How a column of one type is written, all its elements at once (no None among them).
# An ISO date, time or datetime holds nothing an array literal must quote; `int.__repr__`
# writes an int subclass (an enum of ints) as its number, as the driver would.
_COLUMNS: dict[type, Callable[[list[Any]], str]] = {
    str: _texts,
    bool: _booleans,
    int: lambda values: ",".join(map(int.__repr__, values)),
    float: lambda values: ",".join(map(float.__repr__, values)),
    uuid.UUID: lambda values: ",".join(map(str, values)),
    decimal.Decimal: lambda values: ",".join(map(str, values)),
    datetime.datetime: _datetimes,
    datetime.date: lambda values: ",".join(map(datetime.date.isoformat, values)),
    datetime.time: lambda values: ",".join(map(datetime.time.isoformat, values)),
}
_COLUMN_OF: dict[type, Callable[[list[Any]], str]] = {}


def _column_format(kind: type) -> Callable[[list[Any]], str]:
    """The column writer for values of `kind`: its own, else its nearest base's (a
    subclass is written as the value of the base type it extends)."""
    found = _COLUMN_OF.get(kind)
    if found is None:
        for base in kind.__mro__:
            if base in _COLUMNS:
                found = _COLUMN_OF[kind] = _COLUMNS[base]
                break
        else:
            raise TypeError(f"no array literal for {kind.__name__}")
    return found


def array_literal(values: Iterable[Any]) -> str:
    """The PostgreSQL array literal of `values` (text, numbers, booleans, UUIDs, dates
    and aware datetimes, None as NULL), for a parameter the statement casts to its type.

    The writer is chosen once for the column, from its values' type, and writes them
    all in a few C-level calls; only a column with NULLs among its values, or of mixed
    types, goes element by element."""
    items = values if isinstance(values, list) else list(values)
    kinds = set(map(type, items))
    nulls = type(None) in kinds
    kinds.discard(type(None))
    if not kinds:
        return "{" + ",".join(["NULL"] * len(items)) + "}"
    if len(kinds) == 1:
        write = _column_format(kinds.pop())
        if not nulls:
            return "{" + write(items) + "}"
        return "{" + ",".join(["NULL" if v is None else write([v]) for v in items]) + "}"
    return (
        "{" + ",".join(["NULL" if v is None else _column_format(type(v))([v]) for v in items]) + "}"
    )


# `%(name)s::type[]`, not already inside `(SELECT …)`.
ARRAY_PARAMETER = re.compile(r"(?<!SELECT )%\((\w+)\)s::([\w (),]+?)\[\]")


class PlannedOnce(str):
    """A hot statement's text, as `planned_once` writes it: the connection's cursor
    (`pgarrays.cursor`) prepares it at its first run instead of its
    DATABASE_PREPARE_THRESHOLD-th."""

    __slots__ = ()


def planned_once(sql: str) -> PlannedOnce:
    """`sql` with each array parameter (`%(name)s::type[]`) read through a scalar
    subquery, `(SELECT %(name)s::type[])::type[]`.

    psycopg prepares a statement a connection runs often, and PostgreSQL then reuses one
    generic plan, unless a plan made for the values at hand looks cheaper. Given an
    array, the planner counts its elements; a generic plan assumes ten. So a batch of
    one to a few rows (a login code, a burst of single events) always looked cheaper
    planned afresh, and was: the claim, with its ordering probes over every partition,
    spent some 3 ms planning and 0.3 ms running. Behind a subquery the length is
    unknown to both plans, the generic one wins after the fifth run, and every later
    run skips planning."""
    # Cast again outside: `= ANY((SELECT …))` alone would compare with each row.
    return PlannedOnce(ARRAY_PARAMETER.sub(r"(SELECT %(\1)s::\2[])::\2[]", sql))
