"""Writes of the core domain: categories, recipients and intake (API keys: notify.api_keys)."""

from __future__ import annotations

import hashlib
import json
import logging
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import connection, transaction
from django.utils import timezone

from flow.priority import high_work_mark
from notify.cache import TtlCache
from notify.erasure import erasure_hold_needed, erasure_hold_start
from notify.guard import (
    GUARDED_CONTACT_FIELDS,
    ChangeAuthor,
    category_change_log,
    contact_changes_record,
)
from notify.models import (
    Category,
    EventKey,
    Notification,
    Outbox,
    Producer,
    QueueClass,
    Recipient,
)
from pgarrays import array_literal, planned_once

logger = logging.getLogger(__name__)

_categories: TtlCache[Category | None] = TtlCache(lambda: settings.NOTIFY_AUTH_CACHE_SECONDS)


def category_by_key(*, key: str) -> Category | None:
    """A category by its key, cached in the process for NOTIFY_AUTH_CACHE_SECONDS."""
    return _categories.get(key, lambda: Category.objects.filter(key=key).first())


# What the category API may change: how a category's channels are digested or delayed.
CATEGORY_DIGEST_FIELDS = ("digest_windows", "digest_key", "delays_if_unread")

# Rules about a category that the apps above the core keep (the templates app: a change
# must not break a published template). Each returns problems by field, as clean() does.
CategoryCheck = Callable[[Category], dict[str, list[str]]]
_category_checks: list[CategoryCheck] = []


def category_check_add(check: CategoryCheck) -> None:
    """Have category_digests_update refuse what `check` finds wrong (an app's ready())."""
    if check not in _category_checks:
        _category_checks.append(check)


def category_digests_update(
    *, key: str, fields: dict[str, Any], author: ChangeAuthor | None = None
) -> Category | None:
    """Change a category's digest settings (some of CATEGORY_DIGEST_FIELDS), validated as
    an admin save validates them (Category.full_clean, and the checks other apps added
    with category_check_add); None when there is no such category. Raises django's
    ValidationError, by field, and then changes nothing. A change is written to the
    category's admin history with its `author` (category_change_log).

    The pipeline reads a category with each notification it routes, closes or sends, so
    the next route uses the new settings; windows already open close at the time they
    were opened with.
    """
    unknown = set(fields) - set(CATEGORY_DIGEST_FIELDS)
    if unknown:
        raise ValueError(f"not digest settings: {', '.join(sorted(unknown))}")
    with transaction.atomic():
        category = Category.objects.select_for_update().filter(key=key).first()
        if category is None:
            return None
        for name, value in fields.items():
            setattr(category, name, value)
        category.full_clean()
        problems: dict[str, list[str]] = {}
        for check in _category_checks:
            for field, found in check(category).items():
                problems.setdefault(field, []).extend(found)
        if problems:
            raise ValidationError(problems)
        if fields:
            category.save(update_fields=list(fields))
            category_change_log(category=category, fields=list(fields), author=author)
    _categories.forget(key)  # this process's intake at once; others within the cache's time
    return category


# --- Recipients -----------------------------------------------------------------------


def recipient_upsert(
    *, user_id: str, fields: dict[str, str], author: ChangeAuthor | None = None
) -> tuple[Recipient, bool]:
    """Create or update a recipient's contact data; returns (recipient, created).

    A change of an existing person's email or phone is recorded with its `author`
    (notify.guard.contact_changes_record), in the same transaction; a recipient a
    producer creates is that producer's (recipient ownership, notify.guard).

    A user id, email or phone that was erased before puts the recipient on hold: nothing
    is sent to them until fresh consent (notify.erasure).
    """
    creator = {"created_by": author.producer} if author and author.producer else {}
    with transaction.atomic():
        recipient, created = Recipient.objects.get_or_create(
            user_id=user_id, defaults={**fields, **creator}
        )
        if not created and fields:
            before = {name: getattr(recipient, name) for name in GUARDED_CONTACT_FIELDS}
            for name, value in fields.items():
                setattr(recipient, name, value)
            recipient.save(update_fields=[*fields, "updated_at"])
            contact_changes_record(recipient=recipient, before=before, author=author)
        contact_given = created or bool({"email", "phone"} & set(fields))
        if contact_given and erasure_hold_needed(
            user_id=user_id, email=recipient.email, phone=recipient.phone
        ):
            erasure_hold_start(recipient=recipient)
    return recipient, created


# --- Intake ---------------------------------------------------------------------------


class IntakeConflict(Exception):
    """The event id was used before with a different body."""

    def __init__(self, notification: Notification) -> None:
        super().__init__(f"event_id already used with a different body ({notification.pk})")
        self.notification = notification


def request_fingerprint(
    *,
    user_id: str,
    category: str,
    payload: dict[str, Any],
    channels: list[str] | None,
    ttl_seconds: int | None,
    send_at: datetime | None = None,
    occurred_at: datetime | None = None,
    subject: str = "",
) -> str:
    """A stable hash of what was asked, to tell an honest retry from a conflicting reuse."""
    asked = {
        "user_id": user_id,
        "category": category,
        "payload": payload,
        "channels": channels,
        "ttl_seconds": ttl_seconds,
    }
    if send_at is not None:  # absent otherwise, so older fingerprints still match
        asked["send_at"] = send_at.isoformat()
    if occurred_at is not None:  # likewise
        asked["occurred_at"] = occurred_at.isoformat()
    if subject:
        asked["subject"] = subject
    canonical = json.dumps(
        asked,
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
    )
    return hashlib.sha256(canonical.encode()).hexdigest()


class UnknownRecipient(Exception):
    """No recipient has this user id: the product must register it first."""


@dataclass(frozen=True)
class Accepted:
    notification_id: uuid.UUID
    created: bool


@dataclass(frozen=True)
class Event:
    """One event to accept, as the API validated it."""

    event_id: str
    user_id: str
    category: Category
    payload: dict[str, Any]
    channels: list[str] | None = None
    ttl_seconds: int | None = None
    send_at: datetime | None = None  # scheduled: routed at this time, not before
    occurred_at: datetime | None = None  # when it happened; None: when accepted
    subject: str = ""  # what it is about, e.g. order:A-1001


# One statement for a batch of events (see `notifications_accept`).
ACCEPT_SQL = planned_once(
    f"""
    WITH e AS (
        SELECT * FROM unnest(
            %(ids)s::uuid[], %(event_ids)s::text[], %(users)s::text[],
            %(categories)s::bigint[], %(payloads)s::text[], %(channels)s::text[],
            %(ttls)s::integer[], %(fingerprints)s::text[], %(queues)s::text[],
            %(send_ats)s::timestamptz[], %(occurred_ats)s::timestamptz[],
            %(subjects)s::text[]
        ) WITH ORDINALITY AS e(id, event_id, user_id, category_id, payload, channels,
                               ttl, fingerprint, queue, send_at, occurred_at, subject,
                               ord)
    ), known AS (
        SELECT e.*, r.id AS recipient_id
          FROM e JOIN {Recipient._meta.db_table} r ON r.user_id = e.user_id
    ), k AS (
        -- The event key first: the notifications are partitioned by month, so
        -- (producer, event id) is unique in this table, not in theirs.
        INSERT INTO {EventKey._meta.db_table} (notification_id, producer_id, event_id)
        SELECT id, %(producer)s, event_id FROM known ORDER BY ord
        ON CONFLICT (producer_id, event_id) DO NOTHING
        RETURNING notification_id
    ), n AS (
        INSERT INTO {Notification._meta.db_table}
            (id, producer_id, event_id, recipient_id, category_id, payload, channels,
             ttl_seconds, send_at, fingerprint, created_at, occurred_at, subject)
        SELECT e.id, %(producer)s, e.event_id, e.recipient_id, e.category_id,
               e.payload::jsonb, e.channels::jsonb, e.ttl, e.send_at, e.fingerprint,
               %(now)s, COALESCE(e.occurred_at, %(now)s), e.subject
          FROM k JOIN known e ON e.id = k.notification_id
         ORDER BY e.ord
        RETURNING id
    ), o AS (
        INSERT INTO {Outbox._meta.db_table}
            (notification_id, queue, created_at, due_at, publish_attempts, producer_id)
        SELECT n.id, e.queue, %(now)s, GREATEST(%(now)s, e.send_at), 0, %(producer)s
          FROM n JOIN e ON e.id = n.id
    )
    SELECT id FROM n
    """
)


def notification_accept(
    *,
    producer: Producer,
    event_id: str,
    user_id: str,
    category: Category,
    payload: dict[str, Any],
    channels: list[str] | None,
    ttl_seconds: int | None,
    send_at: datetime | None = None,
    occurred_at: datetime | None = None,
    subject: str = "",
) -> Accepted:
    """Store one notification and its outbox row; raises IntakeConflict or
    UnknownRecipient (see `notifications_accept`)."""
    event = Event(
        event_id, user_id, category, payload, channels, ttl_seconds, send_at, occurred_at, subject
    )
    result = notifications_accept(producer=producer, events=[event])[0]
    if isinstance(result, Exception):
        raise result
    return result


def notifications_accept(
    *, producer: Producer, events: Sequence[Event]
) -> list[Accepted | IntakeConflict | UnknownRecipient]:
    """Store notifications and their outbox rows, set-based: one statement for them all.

    The statement finds each recipient and inserts the notifications and their outbox
    rows (the relay publishes the route tasks: a trigger on the outbox wakes it at
    commit, and the request never waits for the broker). An event id seen before with
    the same body answers with the stored notification; with another body, an
    IntakeConflict; an unknown user id, an UnknownRecipient — one answer per event, in
    order. Every event id occurs once in the result's notifications even when a batch
    repeats it.
    """
    if not events:
        return []
    now = timezone.now()
    due_now = (e for e in events if e.send_at is None or e.send_at <= now)
    if any(e.category.sending_queue == QueueClass.HIGH for e in due_now):
        # Campaign work on this host starts yielding now, not once the relay has
        # published the route: the code's own commit and relay step meet less of it.
        high_work_mark()
    ids = [uuid.uuid4() for _ in events]
    fingerprints = [
        request_fingerprint(
            user_id=e.user_id,
            category=e.category.key,
            payload=e.payload,
            channels=e.channels,
            ttl_seconds=e.ttl_seconds,
            send_at=e.send_at,
            occurred_at=e.occurred_at,
            subject=e.subject,
        )
        for e in events
    ]
    with connection.cursor() as cursor:
        cursor.execute(
            ACCEPT_SQL,
            {
                "ids": ids,
                "event_ids": array_literal(e.event_id for e in events),
                "users": array_literal(e.user_id for e in events),
                "categories": array_literal(e.category.pk for e in events),
                "payloads": array_literal(json.dumps(e.payload) for e in events),
                "channels": array_literal(
                    None if e.channels is None else json.dumps(e.channels) for e in events
                ),
                "ttls": array_literal(e.ttl_seconds for e in events),
                "fingerprints": fingerprints,
                "queues": array_literal(e.category.sending_queue for e in events),
                "send_ats": array_literal(e.send_at for e in events),
                "occurred_ats": array_literal(e.occurred_at for e in events),
                "subjects": array_literal(e.subject for e in events),
                "producer": producer.pk,
                "now": now,
            },
        )
        inserted = {row[0] for row in cursor.fetchall()}
    results: list[Accepted | IntakeConflict | UnknownRecipient | None] = [
        Accepted(notification_id, created=True) if notification_id in inserted else None
        for notification_id in ids
    ]
    if all(results):
        return results  # type: ignore[return-value]
    # The rest were stored before (or earlier in this batch), or name an unknown user:
    # the conflicting rows' commits are visible to this new statement.
    existing = {
        n.event_id: n
        for n in Notification.objects.filter(
            event_key__producer=producer,
            event_key__event_id__in=[
                e.event_id for e, r in zip(events, results, strict=True) if r is None
            ],
        ).only("pk", "event_id", "fingerprint")
    }
    answers: list[Accepted | IntakeConflict | UnknownRecipient] = []
    for event, fingerprint, result in zip(events, fingerprints, results, strict=True):
        if result is not None:
            answers.append(result)
            continue
        stored = existing.get(event.event_id)
        if stored is None:
            answers.append(UnknownRecipient(event.user_id))
        elif stored.fingerprint != fingerprint:
            answers.append(IntakeConflict(stored))
        else:
            answers.append(Accepted(stored.pk, created=False))
    return answers
