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
from notify.rows import ModelInsert

_DELIVERY_INSERT = ModelInsert(Delivery)
_ATTEMPT_INSERT = ModelInsert(DeliveryAttempt, computed=("delivery_id",))
# PostgreSQL binds at most 65,535 parameters per statement; a batch's write is split to
# stay under it.
_MAX_PARAMETERS = 60_000


def routed_write(
    notifications: Sequence[Notification],
    rows: list[Delivery],
    attempts: list[DeliveryAttempt],
    now: datetime,
) -> None:
    """The delivery rows, the attempt rows of those settled already (in-app), and the
    notifications marked routed (by id and month: one partition each), in one statement
    for a batch (more only past the parameter bound). Gives `rows` their ids."""
    per_row = len(_DELIVERY_INSERT.fields) + len(_ATTEMPT_INSERT.fields) + 3
    group: list[Notification] = []
    size = 0
    counts: dict[object, int] = {}
    for row in rows:
        counts[row.notification_id] = counts.get(row.notification_id, 0) + 1
    for notification in notifications:
        cost = counts.get(notification.pk, 0) * per_row + 2
        if group and size + cost > _MAX_PARAMETERS:
            _routed_write_group(group, rows, attempts, now)
            group, size = [], 0
        group.append(notification)
        size += cost
    if group:
        _routed_write_group(group, rows, attempts, now)


def _routed_write_group(
    notifications: list[Notification],
    all_rows: list[Delivery],
    all_attempts: list[DeliveryAttempt],
    now: datetime,
) -> None:
    """`routed_write` for notifications whose parameters fit one statement. Written as
    SQL rather than bulk_creates and an update: one round trip instead of three, and
    none of the ORM's per-call compiling."""
    ids = {n.pk for n in notifications}
    rows = [row for row in all_rows if row.notification_id in ids]
    attempts = [a for a in all_attempts if a.delivery.notification_id in ids]
    routed = (
        f"UPDATE {Notification._meta.db_table} SET routed_at = %s"
        " WHERE (id, created_at) IN (SELECT * FROM unnest(%s::uuid[], %s::timestamptz[]))"
    )
    marks = [now, [n.pk for n in notifications], [n.created_at for n in notifications]]
    for notification in notifications:
        notification.routed_at = now
    if not rows:  # nothing to deliver on any channel
        with connection.cursor() as cursor:
            cursor.execute(routed, marks)
        return
    values, params = _DELIVERY_INSERT.values_sql(rows)
    sql = [
        f"WITH d AS (INSERT INTO {Delivery._meta.db_table} ({_DELIVERY_INSERT.columns_sql})"
        f" VALUES {values} RETURNING id, notification_id, channel, target)"
    ]
    if attempts:
        # Each attempt finds its delivery's new id by (notification, channel, target),
        # unique per delivery.
        keyed = []
        for attempt in attempts:
            if attempt.accepted_at is None:
                attempt.accepted_at = attempt.delivery.accepted_at
            one, one_params = _ATTEMPT_INSERT.values_sql([attempt], typed=True)
            keyed.append(one[:-1] + ", %s::uuid, %s::text, %s::text)")
            row = attempt.delivery
            params += [*one_params, row.notification_id, row.channel, row.target]
        columns = _ATTEMPT_INSERT.columns_sql
        picked = ", ".join(f"v.{column}" for column in _ATTEMPT_INSERT.columns)
        sql.append(
            f", a AS (INSERT INTO {DeliveryAttempt._meta.db_table} ({columns}, delivery_id)"
            f" SELECT {picked}, d.id FROM (VALUES {', '.join(keyed)})"
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
