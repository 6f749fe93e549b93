"""The route's last statement: every delivery row of a batch, the attempt rows of those
settled already (in-app), and the notifications marked routed, written at once.

Written as SQL rather than bulk_creates and an update (see notify/rows.py): one round
trip instead of three, and none of the ORM's per-call compiling.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from django.db import connection

from deliveries.models import Delivery, DeliveryAttempt
from notify.models import Notification
from notify.pgarrays import array_literal
from notify.rows import ModelInsert

_DELIVERY_INSERT = ModelInsert(Delivery)
_ATTEMPT_INSERT = ModelInsert(DeliveryAttempt, computed=("delivery_id",))


def routed_write(
    notifications: Sequence[Notification],
    rows: list[Delivery],
    attempts: list[DeliveryAttempt],
    now: datetime,
) -> None:
    """The delivery rows, the attempt rows of those settled already (in-app), and the
    notifications marked routed (by id and month: one partition each), in one statement
    for a batch, whatever its size (one array parameter per column: the 65,535
    parameters a statement may bind are never near). Gives `rows` their ids. Written as
    SQL rather than bulk_creates and an update: one round trip instead of three, and
    none of the ORM's per-call compiling."""
    routed = (
        f"UPDATE {Notification._meta.db_table} SET routed_at = %s"
        " WHERE (id, created_at) IN (SELECT * FROM unnest(%s::uuid[], %s::timestamptz[]))"
    )
    marks = [
        now,
        array_literal(n.pk for n in notifications),
        array_literal(n.created_at for n in notifications),
    ]
    for notification in notifications:
        notification.routed_at = now
    if not rows:  # nothing to deliver on any channel
        with connection.cursor() as cursor:
            cursor.execute(routed, marks)
        return
    deliveries, params = _DELIVERY_INSERT.unnest_sql(rows)
    sql = [
        f"WITH d AS (INSERT INTO {Delivery._meta.db_table} ({_DELIVERY_INSERT.columns_sql})"
        f" SELECT * FROM {deliveries} RETURNING id, notification_id, channel, target)"
    ]
    if attempts:
        # Each attempt finds its delivery's new id by (notification, channel, target),
        # unique per delivery.
        for attempt in attempts:
            if attempt.accepted_at is None:
                attempt.accepted_at = attempt.delivery.accepted_at
        tried, tried_params = _ATTEMPT_INSERT.unnest_sql(attempts)
        params += [
            *tried_params,
            array_literal(a.delivery.notification_id for a in attempts),
            array_literal(a.delivery.channel for a in attempts),
            array_literal(a.delivery.target for a in attempts),
        ]
        columns = _ATTEMPT_INSERT.columns_sql
        picked = ", ".join(f"v.{column}" for column in _ATTEMPT_INSERT.columns)
        keys = tried[: -len(")")] + ", %s::uuid[], %s::text[], %s::text[])"
        sql.append(
            f", a AS (INSERT INTO {DeliveryAttempt._meta.db_table} ({columns}, delivery_id)"
            f" SELECT {picked}, d.id FROM {keys}"
            f" AS v({columns}, key_notification, key_channel, key_target)"
            " JOIN d ON d.notification_id = v.key_notification"
            " AND d.channel = v.key_channel AND d.target = v.key_target)"
        )
    sql.append(f", r AS ({routed}) SELECT id, notification_id, channel, target FROM d")
    params += marks
    with connection.cursor() as cursor:
        cursor.execute("".join(sql), params)
        found = {(str(n), c, t): pk for pk, n, c, t in cursor.fetchall()}
    for row in rows:
        row.pk = found[(str(row.notification_id), row.channel, row.target)]
        row._state.adding, row._state.db = False, connection.alias
