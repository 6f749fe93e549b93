"""The hard-bounce suppression list: an address that bounced hard on a channel (SMTP 5xx
on the recipient, SMPP invalid or barred destination) is not tried again on it.

Written where an attempt's outcome is recorded (deliveries.pipeline.outcome), in the same
transaction; read by routing inside the statement that locks the notification, so a
route costs no extra query. The address is the key: a recipient who changes theirs is
reached again, and support lifts an entry by deleting it in admin.
"""

from __future__ import annotations

from django.contrib.postgres.expressions import ArraySubquery
from django.db.models import OuterRef, Q, Value
from django.db.models.functions import Concat, Lower

from deliveries.models import AddressSuppression
from notify.models import Channel


def suppression_key(*, channel: str, address: str) -> str:
    """How routing recognises a listed address: `channel:address`, as the SQL builds it."""
    return f"{channel}:{_stored(channel, address)}"


def address_suppress(*, channel: str, address: str, evidence: str) -> None:
    """Put (channel, address) on the list with the bounce as evidence (one INSERT).

    An address already there keeps its first evidence.
    """
    AddressSuppression.objects.bulk_create(
        [
            AddressSuppression(
                channel=channel,
                address=_stored(channel, address),
                evidence=evidence,
            )
        ],
        ignore_conflicts=True,
    )


def suppressed_addresses_sql() -> ArraySubquery:
    """For a Notification query: the recipient's email and phone that are on the list,
    as `suppression_key` strings (an annotation, so it rides on the lock's statement)."""
    on_list = AddressSuppression.objects.filter(
        Q(channel=Channel.EMAIL, address=Lower(OuterRef("recipient__email")))
        | Q(channel=Channel.SMS, address=OuterRef("recipient__phone"))
    )
    return ArraySubquery(on_list.values_list(Concat("channel", Value(":"), "address")))


def suppressed_addresses_raw_sql(*, recipient_alias: str) -> str:
    """`suppressed_addresses_sql` for a statement written as SQL, the recipient's row
    under `recipient_alias`: an array of `suppression_key` strings."""
    r = recipient_alias
    return f"""ARRAY(
        SELECT s.channel || ':' || s.address FROM {AddressSuppression._meta.db_table} s
         WHERE (s.channel = '{Channel.EMAIL.value}' AND s.address = lower({r}.email))
            OR (s.channel = '{Channel.SMS.value}' AND s.address = {r}.phone)
    )"""


def _stored(channel: str, address: str) -> str:
    """The address as the list stores it: email case-insensitively, a phone number as is."""
    return address.lower() if channel == Channel.EMAIL else address
