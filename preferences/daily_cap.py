"""The daily marketing cap: each person's marketing notifications counted per local day,
taken in the route's transaction (the gate's `marketing_caps_take`)."""

from __future__ import annotations

from datetime import date

from django.conf import settings
from django.db import connection

from pgarrays import array_literal, planned_once


def marketing_cap_take(*, recipient_id: int, local_date: date) -> bool:
    """Count one marketing notification for the recipient's local day, if under the cap.

    A PostgreSQL upsert on one row per (recipient, local day), run inside the route
    transaction rather than a Redis INCR: the row lock makes concurrent routes on any
    worker count one at a time, the `WHERE count < cap` never lets the count pass the
    cap, and a route that rolls back takes its count back with it — so the counter
    always equals the deliveries that exist. A new local day is simply a new row.
    """
    with connection.cursor() as cursor:
        cursor.execute(
            """
            INSERT INTO preferences_marketingdaycount (recipient_id, local_date, count)
            VALUES (%s, %s, 1)
            ON CONFLICT (recipient_id, local_date)
            DO UPDATE SET count = preferences_marketingdaycount.count + 1
            WHERE preferences_marketingdaycount.count < %s
            RETURNING count
            """,
            [recipient_id, local_date, settings.NOTIFY_MARKETING_DAILY_CAP],
        )
        return cursor.fetchone() is not None


# `marketing_cap_take` for many (recipient, local day) pairs in one statement. Rows are
# taken in a fixed order (sorted by the caller), so two batches never wait on each other
# in a circle.
_CAPS_TAKE_SQL = planned_once(
    """
    INSERT INTO preferences_marketingdaycount (recipient_id, local_date, count)
    SELECT r, d, 1 FROM unnest(%(r)s::bigint[], %(d)s::date[]) AS v(r, d)
    ON CONFLICT (recipient_id, local_date)
    DO UPDATE SET count = preferences_marketingdaycount.count + 1
    WHERE preferences_marketingdaycount.count < %(cap)s
    RETURNING recipient_id, local_date
"""
)


def marketing_caps_take(*, requests: list[tuple[int, date]]) -> list[bool]:
    """`marketing_cap_take` for each (recipient id, local date), in order; one statement
    for the first request of each pair, and one more per repeat (a person twice in one
    batch: rare, and one statement cannot count one row twice)."""
    if not requests:
        return []
    first = sorted(set(requests))
    with connection.cursor() as cursor:
        cursor.execute(
            _CAPS_TAKE_SQL,
            {
                "r": array_literal(r for r, _ in first),
                "d": array_literal(d for _, d in first),
                "cap": settings.NOTIFY_MARKETING_DAILY_CAP,
            },
        )
        granted = {(r, d) for r, d in cursor.fetchall()}
    seen: set[tuple[int, date]] = set()
    answers = []
    for request in requests:
        if request in seen:
            answers.append(marketing_cap_take(recipient_id=request[0], local_date=request[1]))
        else:
            seen.add(request)
            answers.append(request in granted)
    return answers
