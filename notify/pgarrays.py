"""Array parameters for the hot statements, written as PostgreSQL array literals.

A batch's statements bind one array per column (`%s::bigint[]`, `unnest(...)`), so the
text of a statement is the same for any number of rows. Handed a Python list, the driver
builds the array element by element in Python — several calls per element, and the
largest share of a route's CPU in the worker. Handed the literal `{1,2,3}` as one string,
it sends that text as it is, and PostgreSQL parses the elements (in C) when the statement
casts it to its type. `array_literal` writes that text with a few C-level string calls per
element.

The statement must cast each such parameter to its array type (`%(ids)s::bigint[]`): the
literal is text until then.
"""

from __future__ import annotations

import datetime
import decimal
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


def _moment(value: datetime.date | datetime.time) -> str:
    return f'"{value.isoformat()}"'


_FORMATS: dict[type, Callable[[Any], str]] = {
    str: _quoted,
    int: str,
    bool: lambda value: "t" if value else "f",
    float: repr,
    uuid.UUID: str,
    decimal.Decimal: str,
    datetime.datetime: _moment,
    datetime.date: _moment,
    datetime.time: _moment,
}


def _element(value: Any) -> str:
    """One element of an array literal (NULL for None)."""
    if value is None:
        return "NULL"
    format_ = _FORMATS.get(type(value))
    if format_ is not None:
        return format_(value)
    # A subclass (text choices, an enum of ints): the value of its base type, as the
    # driver would send it (not the subclass's own str()).
    if isinstance(value, str):
        return _quoted(str.__str__(value))
    if isinstance(value, int):
        return int.__repr__(value)
    if isinstance(value, datetime.date | datetime.time):
        return _moment(value)
    raise TypeError(f"no array literal for {type(value).__name__} {value!r}")


def array_literal(values: Iterable[Any]) -> str:
    """The PostgreSQL array literal of `values` (text, numbers, booleans, UUIDs, dates
    and aware datetimes, None as NULL), for a parameter the statement casts to its type."""
    return "{" + ",".join(map(_element, values)) + "}"
