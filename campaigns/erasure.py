"""Erasing a person on request: the one service behind `DELETE /v1/users/{user_id}`, the
recipient admin's erase action (and its delete) and `manage.py erase_user`.

It lives in the highest layer because a person's rows are in every app: each app erases
its own (campaign audience lists here, then deliveries.erasure, webhooks.erasure,
preferences.erasure and notify.erasure), all in one transaction with the Redis keys, so
an erasure is complete or not done at all. Consent records stay under a keyed hash of
the user id; the user id, email and phone go on the suppression list as hashes; the
ledger records who asked and when. See docs/erasure.md.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.db import connection, transaction

from analytics.erasure import analytics_person_erase
from campaigns.models import Campaign, CampaignMember, StagedMember
from deliveries.erasure import deliveries_erase
from history.archive import archive_erase_recipient
from notify.erasure import (
    erasure_record,
    erasure_suppress,
    recipient_keys_forget,
    recipient_rows_erase,
    user_id_erased_before,
)
from notify.models import Erasure, ErasureVia, Recipient
from preferences.erasure import preferences_erase
from webhooks.erasure import webhook_events_erase


@dataclass(frozen=True)
class Erased:
    """What one erasure request did: its ledger row, and whether a recipient existed."""

    erasure: Erasure
    found: bool


def person_erase(*, user_id: str, via: str, requested_by: str) -> Erased:
    """Erase the person with this product user id everywhere; safe to ask again.

    A user id with no recipient still has its campaign audience lists cleaned and the
    request is recorded. One that was never registered (no recipient, and not erased
    before) is recorded as such and is not put on the suppression list: otherwise a key
    could erase ids nobody holds yet, and the person who signs up with one later would
    receive nothing, not even a login code. Redis being away raises RedisError and
    nothing is erased: ask again.
    """
    with transaction.atomic():
        recipient = Recipient.objects.select_for_update().filter(user_id=user_id).first()
        removed = {"campaign_audiences": _audience_lists_scrub(user_id=user_id)}
        if recipient is not None:
            removed |= deliveries_erase(recipient=recipient)
            removed |= webhook_events_erase(recipient=recipient)
            removed |= preferences_erase(recipient=recipient)
            removed |= analytics_person_erase(user_id=user_id)
            removed |= recipient_rows_erase(recipient=recipient)
            recipient_keys_forget(recipient_id=recipient.pk, user_id=user_id)
            # Archived months are files, outside the transaction: rewritten once the
            # erasure is committed. If that fails the ledger row still names the person,
            # and retention finishes it (history.archive.archive_ledger_apply).
            recipient_pk = recipient.pk
            transaction.on_commit(lambda: archive_erase_recipient(recipient_pk), robust=True)
        never_registered = recipient is None and not user_id_erased_before(user_id=user_id)
        if not never_registered:
            erasure_suppress(
                user_id=user_id,
                email=recipient.email if recipient else "",
                phone=recipient.phone if recipient else "",
            )
        erasure = erasure_record(
            user_id=user_id,
            recipient_pk=recipient.pk if recipient else None,
            via=via,
            requested_by=requested_by,
            removed=removed,
            never_registered=never_registered,
        )
    return Erased(erasure=erasure, found=recipient is not None)


def _audience_lists_scrub(*, user_id: str) -> int:
    """Take the user id out of every campaign's audience, given as a list or uploaded
    (a file staged before launch too); returns how many campaigns named it. (The
    notifications a campaign made for the person go with the recipient's rows.)"""
    table = Campaign._meta.db_table
    uploaded, _ = CampaignMember.objects.filter(user_id=user_id).delete()
    # A file staged on the launch page but not launched yet names them too.
    StagedMember.objects.filter(user_id=user_id).delete()
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            UPDATE {table}
               SET audience_spec = jsonb_set(
                       audience_spec, '{{user_ids}}', (audience_spec -> 'user_ids') - %(user_id)s)
             WHERE jsonb_typeof(audience_spec -> 'user_ids') = 'array'
               AND (audience_spec -> 'user_ids') ? %(user_id)s
            """,
            {"user_id": user_id},
        )
        return cursor.rowcount + uploaded


def ledger_reapply(*, requested_by: str) -> int:
    """Erase again every recipient whose id is in the ledger and who exists again (a
    database backup restored in place brought them back); returns how many."""
    erased_ids = Erasure.objects.exclude(recipient_pk=None).values("recipient_pk")
    back = list(Recipient.objects.filter(pk__in=erased_ids).values_list("user_id", flat=True))
    for user_id in back:
        person_erase(user_id=user_id, via=ErasureVia.COMMAND, requested_by=requested_by)
    return len(back)
