"""The route's first statement: lock the notifications and read what routing needs.

One statement, written once as SQL (see notify/rows.py): the notification locked for
the route's transaction, with its recipient and category, which in-app template versions
are published for its category, and which of the recipient's addresses are on the
hard-bounce list (as `suppression_key` strings, see deliveries/pipeline/suppression.py).
"""

from __future__ import annotations

from collections.abc import Sequence

from django.db import connection

from deliveries.pipeline.suppression import suppressed_addresses_raw_sql
from notify.models import Category, Channel, Notification, Recipient
from notify.rows import ModelColumns, SharedInstances, instances_split, related_cache
from pgarrays import array_literal, planned_once
from templates_admin.selectors import published_choices_sql

_NOTIFICATION = ModelColumns(Notification, "n")
_RECIPIENT = ModelColumns(Recipient, "r")
_CATEGORY = ModelColumns(Category, "c")
_INAPP_PUBLISHED = published_choices_sql(
    category_column="n.category_id", channel_column=f"'{Channel.INAPP.value}'"
).sql
LOCK_SQL = planned_once(
    f"""
    SELECT {_NOTIFICATION.sql}, {_RECIPIENT.sql}, {_CATEGORY.sql},
           {_INAPP_PUBLISHED}, {suppressed_addresses_raw_sql(recipient_alias="r")}
      FROM notify_notification n
      JOIN notify_recipient r ON r.id = n.recipient_id
      JOIN notify_category c ON c.id = n.category_id
     WHERE n.id = ANY(%(ids)s::uuid[])
     ORDER BY n.id
       FOR UPDATE OF n
"""
)


def notification_lock(*, notification_id: object) -> Notification:
    """The notification, locked until the transaction ends, with `recipient` and
    `category` loaded, `inapp_published` ([[locale, version id], …]) and `suppressed`
    (the recipient's bounced addresses). Raises Notification.DoesNotExist."""
    found = notifications_lock(notification_ids=[notification_id])
    if not found:
        raise Notification.DoesNotExist(f"notification {notification_id} does not exist")
    return found[0]


def notifications_lock(*, notification_ids: Sequence[object]) -> list[Notification]:
    """`notification_lock` for a batch, in one statement: the notifications that exist,
    locked in id order (so two batches never wait on each other in a circle)."""
    with connection.cursor() as cursor:
        cursor.execute(LOCK_SQL, {"ids": array_literal(notification_ids)})
        rows = cursor.fetchall()
    locked = []
    # A batch is mostly one category: its row (and JSON columns) is made into one instance.
    shared: SharedInstances = {_CATEGORY: {}}
    for row in rows:
        (notification, recipient, category), rest = instances_split(
            row, _NOTIFICATION, _RECIPIENT, _CATEGORY, shared=shared
        )
        related_cache(notification, "recipient", recipient)
        related_cache(notification, "category", category)
        notification.inapp_published, notification.suppressed = rest
        locked.append(notification)
    return locked
