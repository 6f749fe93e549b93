"""Claiming a delivery for one attempt, and the checks around the claim.

A sender claims a delivery with a conditional UPDATE (`queued|retrying → sending`), so a
duplicate or early message never sends twice; the same UPDATE holds it back while an
earlier delivery to the same person on its channel is on its way
(deliveries/pipeline/ordering.py).
A push whose feed entry was written to its device's live stream is not sent at all: the
notification reached it there.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import Enum
from typing import Any

from django.conf import settings
from django.db import connection
from django.db.models import F
from django.utils import timezone

from deliveries.models import CLAIMABLE_STATUSES, Delivery, DeliveryStatus
from deliveries.pipeline.enqueue import delivery_enqueue
from deliveries.pipeline.live import device_is_live, devices_live, feed_entry_seen
from deliveries.pipeline.ordering import ORDER_CLEAR_SQL, order_wait_since
from flow.fairness import push_slot_member, push_slot_release
from notify.models import PUSH_CHANNELS, Category, FeedEntry, Notification, Recipient
from notify.rows import (
    ModelColumns,
    SharedInstances,
    instances_split,
    related_cache,
    row_probe,
)
from pgarrays import array_literal, planned_once
from templates_admin.models import TemplateVersion
from templates_admin.selectors import (
    published_choices_sql,
    published_version_pick,
    template_version_cached,
)


@dataclass(frozen=True)
class Loaded:
    """A delivery with its notification, recipient and category, and the template
    version an attempt would use (the pinned one, else the published one)."""

    delivery: Delivery
    version: TemplateVersion | None


_DELIVERY = ModelColumns(Delivery, "d")
_NOTIFICATION = ModelColumns(Notification, "n")
_RECIPIENT = ModelColumns(Recipient, "r")
_CATEGORY = ModelColumns(Category, "c")
# Written once rather than built by the ORM per call (see notify/rows.py). The
# notification is joined in the delivery's month, so only that partition is read. One
# statement loads a whole batch; its text does not depend on the batch's size, so it is
# prepared once. Each delivery, its notification and its recipient are one primary-key
# probe each (`row_probe`), whatever statistics the tables have.
_IN_ITS_MONTH = "id = d.notification_id AND created_at = d.accepted_at"
LOAD_SQL = planned_once(
    f"""
    SELECT {_DELIVERY.sql}, {_NOTIFICATION.sql}, {_RECIPIENT.sql}, {_CATEGORY.sql},
           {published_choices_sql(category_column="n.category_id", channel_column="d.channel").sql}
      FROM unnest(%(ids)s::bigint[]) AS k(id)
     {row_probe("deliveries_delivery", "id = k.id", alias="d")}
     {row_probe("notify_notification", _IN_ITS_MONTH, alias="n")}
     {row_probe("notify_recipient", "id = n.recipient_id", alias="r")}
      JOIN notify_category c ON c.id = n.category_id
"""
)


def deliveries_load(*, delivery_ids: Sequence[int]) -> dict[int, Loaded]:
    """One statement for a batch: each delivery with what it belongs to and the template
    version an attempt would use. Ids that do not exist are missing from the answer."""
    with connection.cursor() as cursor:
        cursor.execute(LOAD_SQL, {"ids": array_literal(delivery_ids)})
        rows = cursor.fetchall()
    loaded: dict[int, Loaded] = {}
    # A batch is mostly one category: its row (and JSON columns) is made into one instance.
    shared: SharedInstances = {_CATEGORY: {}}
    for row in rows:
        delivery, published = _loaded_rows(row, shared)
        if delivery.template_version_id is not None:
            version = template_version_cached(delivery.template_version_id)
        else:
            locale = delivery.notification.recipient.locale
            version = published_version_pick(published, locale=locale)
        loaded[delivery.pk] = Loaded(delivery, version)
    return loaded


def delivery_load(*, delivery_id: int) -> Loaded | None:
    """One delivery, loaded as `deliveries_load` loads a batch."""
    return deliveries_load(delivery_ids=[delivery_id]).get(delivery_id)


def _loaded_rows(row: tuple, shared: SharedInstances) -> tuple[Delivery, list]:
    """LOAD_SQL's row: the delivery with its notification, recipient and category, as
    select_related would have them, and the published versions' [[locale, id], …];
    `shared`: for `instances_split`."""
    built, (published,) = instances_split(
        row, _DELIVERY, _NOTIFICATION, _RECIPIENT, _CATEGORY, shared=shared
    )
    delivery, notification, recipient, category = built
    related_cache(notification, "recipient", recipient)
    related_cache(notification, "category", category)
    related_cache(delivery, "notification", notification)
    return delivery, published


# queued|retrying -> sending, when due and clear of an earlier delivery to the same person
# (ORDER_CLEAR_SQL), for a whole batch in one statement. Written once as SQL rather than
# built by the ORM at every call: compiling the nested order probes cost the sender more
# CPU than anything else it did. Each delivery's month (accepted_at) is given so
# PostgreSQL plans and updates one partition per row; the first claim pins the template
# version (a retry keeps the pinned one). An earlier delivery to the same person that is
# in the same batch does not hold a later one: the batch sends its members in order.
CLAIM_SQL = planned_once(
    f"""
    UPDATE deliveries_delivery AS d
       SET status = '{DeliveryStatus.SENDING.value}', claimed_at = %(now)s, held_since = NULL,
           attempts = d.attempts + 1, updated_at = %(now)s,
           template_version_id = COALESCE(d.template_version_id, v.version_id)
      FROM unnest(%(ids)s::bigint[], %(months)s::timestamptz[], %(versions)s::bigint[])
           AS v(id, month, version_id)
     WHERE d.id = v.id AND d.accepted_at = v.month
       AND d.status IN ({", ".join(f"'{s.value}'" for s in CLAIMABLE_STATUSES)})
       AND (d.next_attempt_at IS NULL OR d.next_attempt_at <= %(now)s)
       AND {ORDER_CLEAR_SQL}
    RETURNING d.id
"""
)


def deliveries_claim(*, loaded: Sequence[Loaded], now: datetime) -> set[int]:
    """Take a batch's deliveries for one attempt each, in one statement; returns the ids
    claimed. The others are not ours to send now (taken, early, or held for an earlier
    delivery: see `delivery_claim_refused`).

    The claim pins the template version on the first attempt, so retries and history
    show the text that was used. Each claimed delivery reflects its claim; its
    `held_since` is left as loaded, for the attempt row (the row's is cleared).
    """
    if not loaded:
        return set()
    with connection.cursor() as cursor:
        cursor.execute(
            CLAIM_SQL,
            {
                "ids": array_literal(item.delivery.pk for item in loaded),
                "months": array_literal(item.delivery.accepted_at for item in loaded),
                "versions": array_literal(
                    item.version.pk if item.version else None for item in loaded
                ),
                "now": now,
                "waited_enough": order_wait_since(now=now),
            },
        )
        claimed = {row[0] for row in cursor.fetchall()}
    for item in loaded:
        if item.delivery.pk not in claimed:
            continue
        delivery = item.delivery
        delivery.status = DeliveryStatus.SENDING
        delivery.claimed_at = now
        delivery.attempts += 1
        if delivery.template_version_id is None and item.version is not None:
            delivery.template_version = item.version
    return claimed


def deliveries_maybe_live(*, deliveries: Sequence[Delivery]) -> set[int]:
    """The ids of these deliveries that are pushes to a device live on the stream now,
    in one Redis round trip whatever their number: the only ones `delivery_skip_if_live`
    may skip, so a batch asks it about these alone instead of one round trip each."""
    pushes = [delivery for delivery in deliveries if delivery.channel in PUSH_CHANNELS]
    live = devices_live(device_ids=[delivery.target for delivery in pushes])
    return {delivery.pk for delivery in pushes if delivery.target in live}


def delivery_skip_if_live(*, delivery: Delivery, claimed_at: datetime | None) -> bool:
    """End a push delivery as `skipped_live` if the person got it on the live stream:
    its device is connected and the notification's feed entry was written to it.

    A live device still gets the push when there is no feed entry (push-only channels,
    no in-app in the category, in-app opted out or failed). Without `claimed_at` (before
    the claim) the sender waits up to NOTIFY_LIVE_SEEN_WAIT for the stream to write an
    entry that exists; with it the caller holds the claim and gives it back (the attempt
    it counted is undone). Costs nothing for other channels, and a Redis read for a push
    to a device that is not live.
    """
    if delivery.channel not in PUSH_CHANNELS or not device_is_live(device_id=delivery.target):
        return False
    entry_id = (
        FeedEntry.objects.filter(notification_id=delivery.notification_id)
        .values_list("pk", flat=True)
        .first()
    )
    wait = settings.NOTIFY_LIVE_SEEN_WAIT if claimed_at is None else 0.0
    if entry_id is None or not feed_entry_seen(
        device_id=delivery.target, entry_id=entry_id, wait_seconds=wait
    ):
        return False
    now = timezone.now()
    rows = Delivery.objects.filter(pk=delivery.pk, accepted_at=delivery.accepted_at)
    changes: dict[str, Any] = {}
    if claimed_at is None:
        rows = rows.filter(status__in=CLAIMABLE_STATUSES)
    else:
        rows = rows.filter(status=DeliveryStatus.SENDING, claimed_at=claimed_at)
        changes["attempts"] = F("attempts") - 1
    skipped = rows.update(
        status=DeliveryStatus.SKIPPED_LIVE,
        reason="",
        next_attempt_at=None,
        finished_at=now,
        updated_at=now,
        **changes,
    )
    if skipped:
        member = push_slot_member(
            channel=delivery.channel,
            delivery_id=delivery.pk,
            notification_id=delivery.notification_id,
        )
        push_slot_release(recipient_id=delivery.notification.recipient_id, member=member)
    return bool(skipped)


class Refusal(Enum):
    """Why a claim was refused."""

    EARLY = "early"  # before next_attempt_at: the message was put back
    TAKEN = "taken"  # someone else has it, or it is already final
    HELD = "held"  # an earlier delivery to the same person on this channel is on its way


def delivery_claim_refused(*, delivery_id: int, now: datetime) -> Refusal:
    """After a failed claim: why. An early message is put back here; a held delivery is
    left to the caller (`delivery_hold`)."""
    row = (
        Delivery.objects.filter(pk=delivery_id)
        .values("status", "next_attempt_at", "channel", "queue")
        .first()
    )
    if row is None:
        raise Delivery.DoesNotExist(f"delivery {delivery_id} does not exist")
    if row["status"] not in CLAIMABLE_STATUSES:
        return Refusal.TAKEN
    due = row["next_attempt_at"]
    if due is None or due <= now:
        return Refusal.HELD  # claimable and due: only the order check refused it
    remaining = (due - now).total_seconds()
    if remaining <= settings.NOTIFY_RETRY_COUNTDOWN_MAX:
        # A redelivered countdown message (worker restart) arrives early: put it back.
        delivery_enqueue(
            delivery_id=delivery_id,
            channel=row["channel"],
            queue=row["queue"],
            countdown=remaining,
            retry=True,
        )
    return Refusal.EARLY
