"""The route's first statement: lock the notification and read what routing needs.

One statement, written once as SQL (see notify/rows.py): the notification locked for
the route's transaction, with its recipient and category, which in-app template versions
are published for its category, and which of the recipient's addresses are on the
hard-bounce list (as `suppression_key` strings, see deliveries/suppression.py).
"""

from __future__ import annotations

from django.db import connection

from deliveries.models import AddressSuppression
from notify.models import Category, Channel, Notification, Recipient
from notify.rows import ModelColumns, related_cache
from templates_admin.selectors import published_choices_sql

_NOTIFICATION = ModelColumns(Notification, "n")
_RECIPIENT = ModelColumns(Recipient, "r")
_CATEGORY = ModelColumns(Category, "c")
_INAPP_PUBLISHED = published_choices_sql(
    category_column="n.category_id", channel_column=f"'{Channel.INAPP.value}'"
).sql
# The list keeps email addresses lower-cased and phone numbers as they are.
_SUPPRESSED = f"""ARRAY(
    SELECT s.channel || ':' || s.address FROM {AddressSuppression._meta.db_table} s
     WHERE (s.channel = '{Channel.EMAIL.value}' AND s.address = lower(r.email))
        OR (s.channel = '{Channel.SMS.value}' AND s.address = r.phone)
)"""
LOCK_SQL = f"""
    SELECT {_NOTIFICATION.sql}, {_RECIPIENT.sql}, {_CATEGORY.sql},
           {_INAPP_PUBLISHED}, {_SUPPRESSED}
      FROM notify_notification n
      JOIN notify_recipient r ON r.id = n.recipient_id
      JOIN notify_category c ON c.id = n.category_id
     WHERE n.id = %(id)s
       FOR UPDATE OF n
"""


def notification_lock(*, notification_id: object) -> Notification:
    """The notification, locked until the transaction ends, with `recipient` and
    `category` loaded, `inapp_published` ([[locale, version id], …]) and `suppressed`
    (the recipient's bounced addresses). Raises Notification.DoesNotExist."""
    with connection.cursor() as cursor:
        cursor.execute(LOCK_SQL, {"id": notification_id})
        row = cursor.fetchone()
    if row is None:
        raise Notification.DoesNotExist(f"notification {notification_id} does not exist")
    at = 0
    built = []
    for columns in (_NOTIFICATION, _RECIPIENT, _CATEGORY):
        built.append(columns.build(row[at : at + columns.width]))
        at += columns.width
    notification, recipient, category = built
    related_cache(notification, "recipient", recipient)
    related_cache(notification, "category", category)
    notification.inapp_published, notification.suppressed = row[at], row[at + 1]
    return notification
