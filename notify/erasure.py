"""Erasure, the core's part: the keyed hash, the core's rows and Redis keys, the ledger,
the suppression list and the hold it puts on a person registered again.

Each app erases its own rows (preferences.erasure, deliveries.erasure); the one service
that erases a person across all of them is campaigns.erasure.person_erase, in the
highest layer, which calls these in order. See docs/erasure.md.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Iterable

from django.conf import settings
from django.contrib.admin.models import LogEntry
from django.contrib.contenttypes.models import ContentType
from django.db import models, transaction
from django.utils import timezone
from django_redis import get_redis_connection

from notify.counts import accepted_counts_settle
from notify.models import (
    Erasure,
    ErasureSuppression,
    FeedEntry,
    Notification,
    Recipient,
    SuppressedKind,
)
from notify.ratelimit import user_bucket_key
from notify.selectors import recipient_id_forget
from notify.unread import unread_key


def erasure_hash(*, kind: str, value: str) -> str:
    """The keyed hash (HMAC-SHA256 with NOTIFY_ERASURE_KEY) that stands for an erased user
    id, email or phone. Emails are compared case-insensitively, as the bounce list does."""
    normal = value.strip().lower() if kind == SuppressedKind.EMAIL else value
    message = f"{kind}:{normal}".encode()
    return hmac.new(settings.NOTIFY_ERASURE_KEY.encode(), message, hashlib.sha256).hexdigest()


def user_hash(user_id: str) -> str:
    """The pseudonym of a user id on kept consent records and in the ledger."""
    return erasure_hash(kind=SuppressedKind.USER_ID, value=user_id)


def _contact_hashes(*, user_id: str, email: str, phone: str) -> list[tuple[str, str]]:
    pairs = [
        (SuppressedKind.USER_ID, user_id),
        (SuppressedKind.EMAIL, email),
        (SuppressedKind.PHONE, phone),
    ]
    return [(kind, erasure_hash(kind=kind, value=value)) for kind, value in pairs if value]


def erasure_suppress(*, user_id: str, email: str = "", phone: str = "") -> None:
    """Put the erased user id, email and phone on the suppression list (as hashes).

    Entries already there stay as they are, so a repeated erasure adds nothing.
    """
    entries = [
        ErasureSuppression(kind=kind, key=key)
        for kind, key in _contact_hashes(user_id=user_id, email=email, phone=phone)
    ]
    ErasureSuppression.objects.bulk_create(entries, ignore_conflicts=True)


def erasure_hold_needed(*, user_id: str, email: str, phone: str) -> bool:
    """Whether this user id, email or phone was erased before (one query): a recipient
    registered with it must not be contacted before fresh consent."""
    match = models.Q(pk__in=[])
    for kind, key in _contact_hashes(user_id=user_id, email=email, phone=phone):
        match |= models.Q(kind=kind, key=key)
    return ErasureSuppression.objects.filter(match).exists()


def recipient_hold_lift(*, recipient: Recipient) -> None:
    """Fresh consent was recorded: the recipient may be contacted again."""
    if recipient.erasure_hold_since is None:
        return
    Recipient.objects.filter(pk=recipient.pk).update(erasure_hold_since=None)
    recipient.erasure_hold_since = None


def admin_log_forget(*, model: type[models.Model], pks: Iterable[object]) -> int:
    """Delete admin log entries about these rows: their text is the object's name (a user
    id, an address). Returns how many went."""
    ids = [str(pk) for pk in pks]
    if not ids:
        return 0
    content_type = ContentType.objects.get_for_model(model)
    deleted, _ = LogEntry.objects.filter(content_type=content_type, object_id__in=ids).delete()
    return deleted


def recipient_rows_erase(*, recipient: Recipient) -> dict[str, int]:
    """Delete the recipient, their feed and their notifications (with the outbox rows and
    anything else still hanging on them); returns counts per kind.

    The apps above must have erased their own rows first: consent records, in particular,
    are detached by preferences.erasure, never deleted.
    """
    notifications = Notification.objects.filter(recipient=recipient)
    notification_ids = list(notifications.values_list("pk", flat=True))
    entry_ids = list(FeedEntry.objects.filter(recipient=recipient).values_list("pk", flat=True))
    removed = {
        "feed_entries": FeedEntry.objects.filter(pk__in=entry_ids).delete()[0],
        "notifications": len(notification_ids),
    }
    accepted_counts_settle(notification_ids=notification_ids)  # the counter keeps them
    notifications.delete()
    admin_log_forget(model=FeedEntry, pks=entry_ids)
    admin_log_forget(model=Notification, pks=notification_ids)
    admin_log_forget(model=Recipient, pks=[recipient.pk])
    Recipient.objects.filter(pk=recipient.pk).delete()
    return removed


def recipient_keys_forget(*, recipient_id: int, user_id: str) -> None:
    """Delete the recipient's keys in Redis: the unread counter and their end-user rate
    bucket (notify.api.auth.request_bucket names it so). The push slots and live registry
    are the deliveries app's (deliveries.erasure). Redis being down raises RedisError, so
    the erasure rolls back and is asked again rather than left half done.

    This process also forgets the user id's cached recipient id, now and once the erasure
    commits (a read in between could cache it again); other processes forget it within
    NOTIFY_AUTH_CACHE_SECONDS, which bounds how long the person's token or a key can
    still read their (emptied) unread count.
    """
    get_redis_connection("default").delete(unread_key(recipient_id), user_bucket_key(recipient_id))
    recipient_id_forget(user_id=user_id)
    transaction.on_commit(lambda: recipient_id_forget(user_id=user_id))


def erasure_record(
    *,
    user_id: str,
    recipient_pk: int | None,
    via: str,
    requested_by: str,
    removed: dict[str, int],
    never_registered: bool = False,
) -> Erasure:
    """Write the ledger row: who asked, when, for which (hashed) person, what went, and
    whether the user id was never registered at all."""
    return Erasure.objects.create(
        user_hash=user_hash(user_id),
        recipient_pk=recipient_pk,
        via=via,
        requested_by=requested_by[: Erasure._meta.get_field("requested_by").max_length],
        removed=removed,
        never_registered=never_registered,
    )


def user_id_erased_before(*, user_id: str) -> bool:
    """Whether this user id is on the suppression list (a person with it was erased)."""
    return ErasureSuppression.objects.filter(
        kind=SuppressedKind.USER_ID, key=user_hash(user_id)
    ).exists()


def erasure_hold_start(*, recipient: Recipient) -> None:
    """Hold a recipient whose user id or address was erased before (set once)."""
    if recipient.erasure_hold_since is not None:
        return
    now = timezone.now()
    Recipient.objects.filter(pk=recipient.pk, erasure_hold_since__isnull=True).update(
        erasure_hold_since=now
    )
    recipient.erasure_hold_since = now
