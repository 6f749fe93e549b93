"""A person's history past retention, without a restore: the archived months' Parquet files
read in place by the analytics store's engine, with the store's events
(analytics/store/archive_read.py). Read by `GET /v1/users/{id}/history` and by support's
"older history" page of a person (history/admin.py). The slower path: seconds, not
milliseconds.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from django.conf import settings
from django.utils import timezone

from analytics.events import person_hash
from analytics.store.archive_read import (
    DELIVERIES_TABLE,
    HISTORY_CURSOR,
    NOTIFICATIONS_TABLE,
    ArchivedMonthFiles,
    PageStart,
    page_start_from_cursor,
    person_history_past_retention,
)
from analytics.store.backend import store_open
from history.models import ArchivedMonth, MonthState
from history.partitions import month_add
from notify.models import Category, Producer, Recipient

# Rows on one page of support's older history.
OLDER_PAGE_SIZE = 100


def archived_months_before(before: datetime) -> list[ArchivedMonthFiles]:
    """The archived months that began before `before`, newest first, with their files."""
    records = ArchivedMonth.objects.filter(
        state=MonthState.ARCHIVED, month__lte=before.date()
    ).order_by("-month")
    return [
        ArchivedMonthFiles(
            month=f"{record.month:%Y-%m}",
            notifications_url=record.files[NOTIFICATIONS_TABLE]["url"],
            deliveries_url=record.files[DELIVERIES_TABLE]["url"],
        )
        for record in records
        if NOTIFICATIONS_TABLE in record.files and DELIVERIES_TABLE in record.files
    ]


def history_past_retention(
    *,
    user_id: str,
    producer_id: int | None,
    start: PageStart,
    limit: int,
) -> list[dict]:
    """One page of the person's history from `start`, newest first, of this producer
    (every producer's when None): the store's events and the archived deliveries, each
    with `category` as its key. The archive knows a person by recipient key, looked up
    here from the user id: an erased person has none."""
    recipient_pk = Recipient.objects.filter(user_id=user_id).values_list("pk", flat=True).first()
    entries = person_history_past_retention(
        store=store_open(),
        producer_id=producer_id,
        person=person_hash(user_id),
        recipient_pk=recipient_pk,
        months=archived_months_before(start.before),
        start=start,
        limit=limit,
    )
    category_ids = {e["category_id"] for e in entries if e.get("category_id") is not None}
    keys = dict(Category.objects.filter(pk__in=category_ids).values_list("pk", "key"))
    for entry in entries:
        if "category_id" in entry:
            entry["category"] = keys.get(entry.pop("category_id"), "")
    return entries


def older_history_start() -> datetime:
    """Where support's older history starts: the end of the newest archived month (the
    timeline has everything after it), or NOTIFY_RETENTION_DAYS ago when none is."""
    newest = (
        ArchivedMonth.objects.filter(state=MonthState.ARCHIVED)
        .order_by("-month")
        .values_list("month", flat=True)
        .first()
    )
    if newest is None:
        return timezone.now() - timedelta(days=settings.NOTIFY_RETENTION_DAYS)
    end = month_add(newest, 1)
    return datetime(end.year, end.month, 1, tzinfo=UTC)


@dataclass(frozen=True)
class OlderHistory:
    """Support's page: the entries (each with its producer's name) and where the next
    page starts."""

    entries: list[dict]
    next_cursor: str | None


def older_history_page(*, recipient: Recipient, cursor: str | None) -> OlderHistory:
    """A page of the recipient's history past what the timeline shows, every producer's,
    from `cursor` (`<ms>-<id>` of the last row of the page before) or from the start."""
    start = PageStart(before=older_history_start())
    if cursor and re.fullmatch(HISTORY_CURSOR, cursor):
        start = page_start_from_cursor(cursor)
    entries = history_past_retention(
        user_id=recipient.user_id, producer_id=None, start=start, limit=OLDER_PAGE_SIZE
    )
    producer_ids = {e["producer_id"] for e in entries}
    producers = dict(Producer.objects.filter(pk__in=producer_ids).values_list("pk", "name"))
    for entry in entries:
        entry["producer"] = producers.get(entry["producer_id"], "")
    next_cursor = entries[-1]["cursor"] if len(entries) == OLDER_PAGE_SIZE else None
    return OlderHistory(entries=entries, next_cursor=next_cursor)
