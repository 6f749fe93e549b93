"""The route's last statement: every delivery row of a batch written, and the
notifications marked routed, at once.

Written as SQL rather than a bulk_create and an update (see notify/rows.py): one round
trip instead of two, and none of the ORM's per-call compiling. The rows are plain tuples
(`DeliveryRow`), not model instances: building an instance per delivery cost the worker
more than the statement cost PostgreSQL.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from functools import cache
from typing import NamedTuple

from django.db import connection

from deliveries.models import Delivery
from notify.models import Notification
from notify.rows import row_probe
from pgarrays import array_literal, planned_once


class DeliveryRow(NamedTuple):
    """A new delivery as the route writes it. The columns not named here take a new
    delivery's values (`NEW_DELIVERY`): no attempts, no claim, no pinned version, no
    error."""

    notification_id: object
    channel: str
    target: str
    queue: str
    status: str
    reason: str
    next_attempt_at: datetime | None
    deadline: datetime
    finished_at: datetime | None
    enqueued_at: datetime | None
    gate_seal: str
    recipient_id: int
    occurred_at: datetime | None
    accepted_at: datetime


# What a new delivery holds in the columns a DeliveryRow does not name (the route writes
# these, see `route_write_sql`, and the database fills the counted ones); created_at and
# updated_at are the route's time.
NEW_DELIVERY = {
    "counted_status": "",
    "counted_attempts": 0,
    "attempts": 0,
    "claimed_at": None,
    "template_version_id": None,
    "provider_message_id": "",
    "attempt_budget_from": 0,
    "last_error": "",
    "held_since": None,
    "claim_recoveries": 0,
    "webhook_sequence": 0,
    "pinned_provider": "",
}

# Each notification is found by one primary-key probe (`row_probe`) and updated where
# that probe found it (its partition and row address). Written as a join on (id,
# created_at), a partition without statistics yet was planned as a scan of the whole
# partition per batch: a campaign's route read all its notifications for every 200.
_NOTIFICATIONS = Notification._meta.db_table
_KEYED = "id = v.id AND created_at = v.month"
ROUTED_SQL = planned_once(
    f"UPDATE {_NOTIFICATIONS} n SET routed_at = %(now)s"
    " FROM (SELECT f.tableoid, f.ctid"
    " FROM unnest(%(routed_ids)s::uuid[], %(routed_months)s::timestamptz[]) AS v(id, month)"
    f" {row_probe(_NOTIFICATIONS, _KEYED, alias='f', columns='tableoid, ctid')}"
    ") found WHERE n.tableoid = found.tableoid AND n.ctid = found.ctid"
)


@cache
def route_write_sql() -> str:
    """The INSERT of a batch's rows (one array per column) and the routed mark, as one
    statement. Built on first use: the array types come from the connection."""
    meta = Delivery._meta
    arrays = ", ".join(
        f"%(c{index})s::{meta.get_field(name).cast_db_type(connection)}[]"
        for index, name in enumerate(DeliveryRow._fields)
    )
    named = ", ".join(f'"{meta.get_field(name).column}"' for name in DeliveryRow._fields)
    return planned_once(
        f"WITH d AS (INSERT INTO {meta.db_table} ({named}, attempts, claimed_at,"
        " template_version_id, provider_message_id, attempt_budget_from, last_error,"
        " created_at, updated_at, held_since)"
        f" SELECT v.*, 0, NULL, NULL, '', 0, '', %(now)s, %(now)s, NULL FROM unnest({arrays}) v"
        " RETURNING id, notification_id, channel, target)"
        f", r AS ({ROUTED_SQL}) SELECT id, notification_id, channel, target FROM d"
    )


def routed_write(
    notifications: Sequence[Notification], rows: Sequence[DeliveryRow], now: datetime
) -> list[int]:
    """The delivery rows and the notifications marked routed (by id and month: one
    partition each), in one statement for a batch, whatever its size (one array
    parameter per column: the 65,535 parameters a statement may bind are never near).
    Returns the rows' new ids, in order."""
    params = {
        "now": now,
        "routed_ids": array_literal([n.pk for n in notifications]),
        "routed_months": array_literal([n.created_at for n in notifications]),
    }
    for notification in notifications:
        notification.routed_at = now
    if not rows:  # nothing to deliver on any channel
        with connection.cursor() as cursor:
            cursor.execute(ROUTED_SQL, params)
        return []
    for index, column in enumerate(zip(*rows, strict=True)):
        params[f"c{index}"] = array_literal(list(column))
    with connection.cursor() as cursor:
        cursor.execute(route_write_sql(), params)
        found = {(str(n), c, t): pk for pk, n, c, t in cursor.fetchall()}
    return [found[(str(row.notification_id), row.channel, row.target)] for row in rows]
