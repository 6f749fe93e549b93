"""Closing digest windows: each due window becomes one delivery (or none), through the
gate again. See deliveries/pipeline/digests.py for the whole story and docs/digests.md."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import datetime

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from deliveries.models import (
    Delivery,
    DeliveryStatus,
    DigestItem,
    DigestWindow,
    DigestWindowState,
    Reason,
)
from deliveries.pipeline.digests import wakeups_publish
from deliveries.pipeline.enqueue import deliveries_enqueue
from deliveries.pipeline.routing import gate_decide_many
from notify.models import PUSH_CHANNELS, Channel, Notification
from pgarrays import array_literal
from preferences.gate import ChannelDecision

logger = logging.getLogger(__name__)

_CLOSE_DELIVERIES_SQL = f"""
UPDATE {Delivery._meta.db_table} AS d
   SET status = v.status, reason = v.reason, next_attempt_at = v.next_attempt_at,
       finished_at = v.finished_at, enqueued_at = v.enqueued_at, updated_at = %(now)s
  FROM unnest(%(ids)s::bigint[], %(months)s::timestamptz[], %(statuses)s::varchar[],
              %(reasons)s::varchar[], %(next)s::timestamptz[], %(finished)s::timestamptz[],
              %(enqueued)s::timestamptz[])
       AS v(id, month, status, reason, next_attempt_at, finished_at, enqueued_at)
 WHERE d.id = v.id AND d.accepted_at = v.month AND d.status = '{DeliveryStatus.DIGESTING.value}'
"""

_CLOSE_WINDOWS_SQL = f"""
UPDATE {DigestWindow._meta.db_table} AS w
   SET state = v.state, closed_at = %(now)s, carrier_id = v.carrier_id,
       carrier_accepted_at = v.carrier_month
  FROM unnest(%(ids)s::bigint[], %(states)s::varchar[], %(carriers)s::bigint[],
              %(months)s::timestamptz[]) AS v(id, state, carrier_id, carrier_month)
 WHERE w.id = v.id
"""


def digests_close(*, now: datetime | None = None) -> int:
    """Close the digest windows that are due: each becomes one delivery, or none.

    A window's carrier is its last event's delivery (so per-recipient order places the
    digest by its last event). The carrier passes the gate again now: allowed → queued
    and enqueued after commit, every other item `digested`; quiet hours → the carrier
    `deferred` to their end (the release sends it then), the others `digested`;
    declined (consent withdrawn, opted out) → every item `suppressed` with the gate's
    reason. One transaction, the same statements for a batch of windows whatever their
    events: the windows locked (skipping those a route or another close holds), their
    items, the carriers' notifications, the gate's reads, one UPDATE of the deliveries
    and one of the windows. A worker killed before the commit leaves every window open
    for the next run; after it, the carrier is a queued row that the sweeper resends if
    its message was lost. Returns how many windows were closed.
    """
    now = now or timezone.now()
    enqueue: list[tuple[int, str, str]] = []
    deferred: dict[str, list[datetime]] = {}  # queue → when quiet hours end
    owners: dict[int, tuple[int, object]] = {}
    with transaction.atomic():
        windows = list(
            DigestWindow.objects.select_for_update(skip_locked=True)
            .filter(state=DigestWindowState.OPEN, closes_at__lte=now)
            .order_by("closes_at")[: settings.NOTIFY_DIGEST_CLOSE_BATCH]
        )
        if not windows:
            return 0
        items: dict[int, list[tuple[int, object, datetime]]] = {w.pk: [] for w in windows}
        for window_id, delivery_id, notification_id, month in (
            DigestItem.objects.filter(window_id__in=list(items))
            .order_by("window_id", "occurred_at", "accepted_at", "delivery_id")
            .values_list("window_id", "delivery_id", "notification_id", "accepted_at")
        ):
            items[window_id].append((delivery_id, notification_id, month))
        # Only items still `digesting` count: one cancelled or erased meanwhile is neither
        # listed as sent nor a carrier.
        live = {
            pk: (target, queue)
            for pk, target, queue in Delivery.objects.filter(
                pk__in=[item[0] for found in items.values() for item in found],
                status=DeliveryStatus.DIGESTING,
            ).values_list("pk", "target", "queue")
        }
        items = {w: [item for item in found if item[0] in live] for w, found in items.items()}
        notifications = (
            Notification.objects.select_related("recipient", "category")
            .filter(pk__in=[found[-1][1] for found in items.values() if found])
            .in_bulk()
        )
        asked = [
            (w, items[w.pk][-1])
            for w in windows
            if items[w.pk] and items[w.pk][-1][1] in notifications
        ]
        verdicts = gate_decide_many(
            [(notifications[carrier[1]], [w.channel]) for w, carrier in asked], now=now
        )
        decided = {
            w.pk: _verdict_for(decisions, live[carrier[0]][0])
            for (w, carrier), decisions in zip(asked, verdicts, strict=True)
        }
        rows: list[tuple] = []  # (id, month, status, reason, next, finished, enqueued)
        closed: list[tuple] = []  # (window id, state, carrier id, carrier month)
        for window in windows:
            found = items[window.pk]
            verdict = decided.get(window.pk)
            if verdict is None:  # nothing left to send (erased, cancelled): close it empty
                closed.append((window.pk, DigestWindowState.DROPPED, None, None))
                continue
            carrier_id, _, carrier_month = found[-1]
            if verdict.allowed:
                state = DigestWindowState.SENT
                queue = live[carrier_id][1]
                rows.append((carrier_id, carrier_month, DeliveryStatus.QUEUED, "", now, None, now))
                enqueue.append((carrier_id, window.channel, queue))
                owners[carrier_id] = (window.recipient_id, found[-1][1])
            elif verdict.status == DeliveryStatus.DEFERRED:
                state = DigestWindowState.DEFERRED
                deferred.setdefault(live[carrier_id][1], []).append(verdict.not_before)
                rows.append((carrier_id, carrier_month, DeliveryStatus.DEFERRED, verdict.reason,
                             verdict.not_before, None, None))  # fmt: skip
            else:
                state = DigestWindowState.DROPPED
                reason = verdict.reason or Reason.NO_ADDRESS
                rows.extend(
                    (pk, month, DeliveryStatus.SUPPRESSED, reason, None, now, None)
                    for pk, _, month in found
                )
                closed.append((window.pk, state, None, None))
                continue
            rows.extend(
                (pk, month, DeliveryStatus.DIGESTED, Reason.IN_DIGEST, None, now, None)
                for pk, _, month in found[:-1]
            )
            closed.append((window.pk, state, carrier_id, carrier_month))
        _close_write(rows, closed, now)
    # One message per channel and queue for the batch's carriers (enqueued_at was
    # written with them; a failed publish clears it and the sweeper resends).
    deliveries_enqueue(
        started=enqueue,
        push_owners={pk: owners[pk] for pk, channel, _ in enqueue if channel in PUSH_CHANNELS},
        push_devices={pk: live[pk][0] for pk, channel, _ in enqueue if channel == Channel.WEBPUSH},
    )
    # A digest held by quiet hours goes when they end, not at beat's next release.
    for queue, ends in deferred.items():
        wakeups_publish(closes=[], delayed=ends, queue=queue)
    logger.info("closed %s digest windows, %s sent now", len(windows), len(enqueue))
    return len(windows)


def _verdict_for(decisions: Sequence[ChannelDecision], target: str) -> ChannelDecision:
    """The gate's verdict on the carrier's own target (an address changed meanwhile has
    none: the digest is not sent to an address the person no longer has)."""
    for decision in decisions:
        if decision.target == target:
            return decision
    if decisions and not decisions[0].allowed and decisions[0].status != "deferred":
        return decisions[0]
    return ChannelDecision("", target, DeliveryStatus.SUPPRESSED, Reason.NO_ADDRESS)


def _close_write(rows: Sequence[tuple], closed: Sequence[tuple], now: datetime) -> None:
    """The close's two writes: every item's delivery, then every window."""
    with connection.cursor() as cursor:
        if rows:
            ids, months, statuses, reasons, nexts, finished, enqueued = zip(*rows, strict=True)
            cursor.execute(
                _CLOSE_DELIVERIES_SQL,
                {
                    "now": now,
                    "ids": array_literal(ids),
                    "months": array_literal(months),
                    "statuses": array_literal([str(s) for s in statuses]),
                    "reasons": array_literal([str(r) for r in reasons]),
                    "next": array_literal(nexts),
                    "finished": array_literal(finished),
                    "enqueued": array_literal(enqueued),
                },
            )
        ids, states, carriers, months = zip(*closed, strict=True)
        cursor.execute(
            _CLOSE_WINDOWS_SQL,
            {
                "now": now,
                "ids": array_literal(ids),
                "states": array_literal([str(s) for s in states]),
                "carriers": array_literal(carriers),
                "months": array_literal(months),
            },
        )


def digest_windows_due_left(*, now: datetime | None = None) -> bool:
    """Whether a due window is still open after a close ran: one that a route (or another
    close) held locked then, so the close skipped it."""
    now = now or timezone.now()
    return DigestWindow.objects.filter(state=DigestWindowState.OPEN, closes_at__lte=now).exists()
