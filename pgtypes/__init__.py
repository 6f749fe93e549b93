"""Timestamps read from PostgreSQL by psycopg's C loader, in UTC as Django expects them.

Django reads every `timestamptz` through a loader of its own (`BaseTzLoader`) that
extends psycopg's pure-Python one: about 3.7 µs a value here, against 0.6 µs through
psycopg's C loader. A claimed or routed row carries several timestamps: the medium
worker's CPU per FCM push fell by about 5 % with this (the bench's S10).
`UtcTimestampLoader` hands the text to the C loader and keeps Django's contract: an
aware datetime in UTC.

`install_on(connection)` puts it on a Django connection whose time zone is UTC (ours,
with USE_TZ and TIME_ZONE "UTC") when psycopg runs its C implementation; otherwise it
leaves Django's loader in place.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import psycopg
from psycopg.adapt import Loader
from psycopg.pq import Format


def _c_timestamptz_loader() -> type[Loader] | None:
    """psycopg's C loader class for timestamptz, or None when psycopg runs in Python or
    no longer keeps it there (then Django's loader stays: slower, still right; the
    test of this module fails, so an upgrade that moves it is noticed)."""
    try:
        if psycopg.pq.__impl__ == "binary":
            from psycopg_binary import _psycopg
        elif psycopg.pq.__impl__ == "c":
            from psycopg_c import _psycopg
        else:
            return None
        return _psycopg.TimestamptzLoader
    except (ImportError, AttributeError):
        return None


_C_LOADER = _c_timestamptz_loader()
TIMESTAMPTZ_OID = psycopg.adapters.types["timestamptz"].oid


class UtcTimestampLoader(Loader):
    """A timestamptz as an aware datetime in UTC, parsed in C.

    `timezone` is what Django compares with the connection's own before every cursor
    (`DatabaseWrapper.create_cursor`): equal, it keeps this loader instead of
    registering its own on the cursor."""

    timezone = UTC

    def __init__(self, oid: int, context: Any = None) -> None:
        super().__init__(oid, context)
        self._load = _C_LOADER(oid, context).load

    def load(self, data: Any) -> datetime:
        value = self._load(data)
        # The C loader answers in the session's time zone: UTC once Django has set it,
        # but convert rather than trust it.
        return value if value.tzinfo is UTC else value.astimezone(UTC)


def install_on(connection: Any) -> bool:
    """Read this Django connection's timestamptz values with `UtcTimestampLoader`, if
    it is a PostgreSQL connection in UTC and psycopg runs in C; whether it does."""
    if _C_LOADER is None or connection.vendor != "postgresql" or connection.timezone is not UTC:
        return False
    adapters = connection.connection.adapters
    if adapters.get_loader(TIMESTAMPTZ_OID, Format.TEXT) is not UtcTimestampLoader:
        adapters.register_loader(TIMESTAMPTZ_OID, UtcTimestampLoader)
    return True
