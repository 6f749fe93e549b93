"""Per-recipient order on each channel, and stale events that are not sent.

Order: a delivery is not handed to its provider while an earlier one to the same person
on the same channel is still on its way — except that campaign work (the `low` class)
never holds anything else: a login code or an order email does not wait behind the
person's marketing email still in a campaign's backlog (the priority promise), while a
campaign email does wait behind an earlier login code or order email. "Earlier" is by the
event's `occurred_at`, then by acceptance, then by notification id (a total order, so
two deliveries never wait for each other); "on its way" is `ON_ITS_WAY_SQL`, or a
notification of that person not routed yet (its deliveries do not exist yet). A delivery
whose earlier one is retrying after a failed try is not held: provider queues and retries
may reorder anyway, and a flapping provider must not stall everything after it.

The check is a condition of the claim UPDATE (two index probes inside that one
statement, see `ORDER_CLEAR_SQL`), so an unheld send costs no extra statement there; a
held one is put back with a countdown and goes anyway once held NOTIFY_ORDER_WAIT_MAX,
the wait written on its attempt row (`held_ms`). When a delivery is done with, what it
held is published at once (`successor_wake`; after a try it rides on the attempt row's
INSERT, so it costs no statement of its own), so a burst to one person flows one by one.

Stale: with a `subject`, an event older than one already delivered to the person on the
same channel about the same subject is not sent on push, SMS or email; the delivery ends
`superseded`. The feed keeps every event in its place (in-app is never superseded).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import datetime, timedelta

from django.conf import settings
from django.db import connection
from django.db.models import F, Q
from django.utils import timezone

from deliveries.models import CLAIMABLE_STATUSES, Delivery, DeliveryStatus, Reason
from deliveries.pipeline.enqueue import deliveries_enqueue, delivery_enqueue
from flow.fairness import push_slot_member, push_slot_release
from notify.models import PUSH_CHANNELS, Category, Channel, QueueClass
from pgarrays import array_literal

logger = logging.getLogger(__name__)

# What an earlier delivery may be doing for a later one to wait ("on its way"): queued,
# sending, or put back before its first try (a rate limit or open breaker postponed it:
# our own pacing, not a provider's retry). The index `delivery_order_pending` has this
# condition, and ON_ITS_WAY_SQL says it for the probe's alias `e`.
ON_ITS_WAY_SQL = (
    f"(e.status IN ('{DeliveryStatus.QUEUED.value}', '{DeliveryStatus.SENDING.value}')"
    f" OR (e.status = '{DeliveryStatus.RETRYING.value}' AND e.attempts = 0))"
)
SUPERSEDABLE_CHANNELS = frozenset({Channel.EMAIL, Channel.SMS, *PUSH_CHANNELS})

# Order ranks of the queue classes: an earlier delivery holds a later one only when its
# rank is the same or lower. Campaign work ranks last; high and medium keep one order
# between them (a login code after an order email still waits for it).
ORDER_RANKS = {QueueClass.HIGH.value: 0, QueueClass.MEDIUM.value: 0, QueueClass.LOW.value: 1}


def order_rank_sql(queue: str) -> str:
    """The order rank (ORDER_RANKS) of the queue class in the SQL column or expression
    `queue`; an unknown class ranks 0, as `order_rank` says."""
    whens = " ".join(f"WHEN '{name}' THEN {rank}" for name, rank in ORDER_RANKS.items())
    return f"(CASE {queue} {whens} ELSE 0 END)"


def order_rank(queue: str) -> int:
    """The order rank (ORDER_RANKS) of a queue class; an unknown class ranks 0."""
    return ORDER_RANKS.get(queue, 0)


# A notification's queue class (alias `n`), looked up per row the probe's index found: a
# join to the category instead let the planner read every notification of a category.
_NOTIFICATION_QUEUE_SQL = (
    f"(SELECT {Category.sending_queue_sql('c')} FROM notify_category c WHERE c.id = n.category_id)"
)


def _before_sql(row: str, occurred: str, accepted: str, tiebreak: str) -> str:
    """`row`'s (occurred, accepted, notification id) sorts before the claimed delivery's
    (alias `d`). The first term bounds the index range read; the rest decide within it."""
    return (
        f"{row}.{occurred} <= d.occurred_at AND ({row}.{occurred} < d.occurred_at"
        f" OR ({row}.{occurred} = d.occurred_at AND {row}.{accepted} < d.accepted_at)"
        f" OR ({row}.{occurred} = d.occurred_at AND {row}.{accepted} = d.accepted_at"
        f" AND {row}.{tiebreak} < d.notification_id))"
    )


# The claim's condition on the delivery being claimed (alias `d`): no earlier delivery
# to this person on this channel that may hold it (ORDER_RANKS) is on its way (nor such
# an earlier notification not routed yet), or it has been held since before
# %(waited_enough)s (now - NOTIFY_ORDER_WAIT_MAX) already. Both probes are index range
# reads (`delivery_order_pending`, whose condition ON_ITS_WAY_SQL writes in literals so
# that a prepared statement's plan can use it; and `notif_unrouted_order`) bounded by
# what that person has in flight, not scans. Rows from before ordering existed have no
# recipient and are never held.
# An earlier delivery in the claim's own batch (%(ids)s) does not hold a later one: the
# batch sends its members in order, and gives a member back when an earlier batch-mate
# was not claimed (`batch_order_holds`).
ORDER_CLEAR_SQL = f"""(
    d.recipient_id IS NULL
    OR d.held_since <= %(waited_enough)s
    OR (
        NOT EXISTS (
            SELECT 1 FROM deliveries_delivery e
             WHERE e.recipient_id = d.recipient_id AND e.channel = d.channel
               AND {ON_ITS_WAY_SQL}
               AND {_before_sql("e", "occurred_at", "accepted_at", "notification_id")}
               AND {order_rank_sql("e.queue")} <= {order_rank_sql("d.queue")}
               AND e.id <> ALL(%(ids)s::bigint[])
        )
        AND NOT EXISTS (
            SELECT 1 FROM notify_notification n
             WHERE n.recipient_id = d.recipient_id
               AND n.routed_at IS NULL AND n.cancelled_at IS NULL
               AND (n.send_at IS NULL OR n.send_at <= %(now)s)
               AND {_before_sql("n", "occurred_at", "created_at", "id")}
               AND {order_rank_sql(_NOTIFICATION_QUEUE_SQL)} <= {order_rank_sql("d.queue")}
        )
    )
)"""


def order_wait_since(*, now: datetime) -> datetime:
    """A delivery held since before this goes anyway (NOTIFY_ORDER_WAIT_MAX)."""
    return now - timedelta(seconds=settings.NOTIFY_ORDER_WAIT_MAX)


def held_ms(*, delivery: Delivery, now: datetime) -> int:
    """How long the delivery was held for an earlier one before this claim (0: not held)."""
    if delivery.held_since is None:
        return 0
    return max(0, int((now - delivery.held_since).total_seconds() * 1000))


def hold_countdown(*, waited: float) -> float:
    """When to look again at a delivery held `waited` seconds, should no wake come.

    The wake publishes a held delivery as soon as the one before it is done with, so
    this look is only the net under a wake that cannot come (the earlier one was
    cancelled, or its notification routed to nothing on this channel): soon at first,
    then twice as far apart, and at the bound at the latest. Each look costs a send
    message and its claim; a burst holds thousands of deliveries at once, and looks
    every few hundred milliseconds would take the channel's senders from the sends
    they wait for."""
    remaining = settings.NOTIFY_ORDER_WAIT_MAX - waited
    return max(settings.NOTIFY_ORDER_RECHECK, min(waited, remaining))


# Mark a refused delivery held (since its first refusal), and say in the same statement
# whether it is clear now: the earlier one may have been recorded between the claim and
# this mark, when its wake found nothing held to wake (see `delivery_hold`).
_HOLD_SQL = f"""
    UPDATE {Delivery._meta.db_table} AS d
       SET held_since = COALESCE(d.held_since, %(now)s), enqueued_at = %(now)s,
           updated_at = %(now)s
     WHERE d.id = %(id)s AND d.accepted_at = %(month)s
       AND d.status IN ({", ".join(f"'{s.value}'" for s in CLAIMABLE_STATUSES)})
    RETURNING {ORDER_CLEAR_SQL}
"""


def delivery_hold(*, delivery: Delivery, now: datetime) -> bool:
    """The claim was refused for an earlier delivery: note since when it waits, and
    publish its send again — at once when the earlier one is done with already (its
    wake ran before this delivery was marked held, and found nothing to wake), else
    after `hold_countdown`, unless the wake comes first. False when it is no longer
    claimable (taken meanwhile).

    One statement, as the plain mark was: the order check rides on it."""
    waited = (now - (delivery.held_since or now)).total_seconds()
    with connection.cursor() as cursor:
        cursor.execute(
            _HOLD_SQL,
            {
                "id": delivery.pk,
                "month": delivery.accepted_at,
                "now": now,
                "waited_enough": order_wait_since(now=now),
                "ids": array_literal([delivery.pk]),
            },
        )
        row = cursor.fetchone()
    if row is None:
        return False
    (clear,) = row
    countdown = None if clear else hold_countdown(waited=waited)
    logger.debug("delivery %s: held %.1f s, look again in %s", delivery.pk, waited, countdown)
    delivery_enqueue(
        delivery_id=delivery.pk,
        channel=delivery.channel,
        queue=delivery.queue,
        countdown=countdown,
        retry=True,
        push_owner=(delivery.notification.recipient_id, delivery.notification_id),
        mark_enqueued=False,
    )
    return True


def newer_delivered(*, delivery: Delivery) -> bool:
    """A newer event about the same subject already reached the person on this channel.

    One query, only for a notification with a subject on a supersedable channel: the
    person's notifications with that subject (`notif_recipient_subject`), then their
    delivery on this channel (`uniq_delivery_target`).
    """
    notification = delivery.notification
    if not notification.subject or delivery.channel not in SUPERSEDABLE_CHANNELS:
        return False
    mine = (notification.occurred_at, notification.created_at, notification.pk)
    return (
        Delivery.objects.filter(
            notification__recipient_id=notification.recipient_id,
            notification__subject=notification.subject,
            channel=delivery.channel,
            status__in=(DeliveryStatus.DELIVERED, DeliveryStatus.REACHED),
        )
        .filter(
            Q(notification__occurred_at__gt=mine[0])
            | Q(notification__occurred_at=mine[0], notification__created_at__gt=mine[1])
            | Q(
                notification__occurred_at=mine[0],
                notification__created_at=mine[1],
                notification_id__gt=mine[2],
            )
        )
        .exists()
    )


def delivery_supersede(*, delivery: Delivery, claimed_at: datetime) -> bool:
    """End a claimed delivery `superseded` (no provider call; the claim's attempt is
    given back). False when the claim was taken over meanwhile."""
    now = timezone.now()
    ended = Delivery.objects.filter(
        pk=delivery.pk, status=DeliveryStatus.SENDING, claimed_at=claimed_at
    ).update(
        status=DeliveryStatus.SUPERSEDED,
        reason=Reason.NEWER_DELIVERED,
        attempts=F("attempts") - 1,
        next_attempt_at=None,
        finished_at=now,
        updated_at=now,
    )
    if ended and delivery.channel in PUSH_CHANNELS:
        member = push_slot_member(
            channel=delivery.channel,
            delivery_id=delivery.pk,
            notification_id=delivery.notification_id,
        )
        push_slot_release(recipient_id=delivery.notification.recipient_id, member=member)
    if ended:
        delivery.status = DeliveryStatus.SUPERSEDED
        delivery.reason = Reason.NEWER_DELIVERED
    return bool(ended)


# The next delivery held behind one that is done with, for the same person and channel,
# of each order rank it may have held (its own and campaign work: a rank's later
# deliveries wait behind its first), marked enqueued as they are woken. An index range
# read on `delivery_order_pending` over what the person has in flight there.
WAKE_HELD_SQL = f"""
    SELECT DISTINCT ON ({order_rank_sql("e.queue")}) e.id
      FROM {Delivery._meta.db_table} e
     WHERE e.recipient_id = f.recipient_id AND e.channel = f.channel
       AND {ON_ITS_WAY_SQL}
       AND e.held_since IS NOT NULL
       AND (e.occurred_at, e.accepted_at, e.notification_id)
           > (f.occurred_at, f.accepted_at, f.notification_id)
       AND {order_rank_sql("e.queue")} >= {order_rank_sql("f.queue")}
     ORDER BY {order_rank_sql("e.queue")}, e.occurred_at, e.accepted_at, e.notification_id
"""
_WAKE_SQL = f"""
    UPDATE {Delivery._meta.db_table} SET enqueued_at = %(wake_now)s
     WHERE id IN (
        SELECT w.id
          FROM (SELECT %(wake_recipient)s::bigint AS recipient_id,
                       %(wake_channel)s::text AS channel, %(wake_queue)s::text AS queue,
                       %(wake_occurred)s::timestamptz AS occurred_at,
                       %(wake_accepted)s::timestamptz AS accepted_at,
                       %(wake_notification)s::uuid AS notification_id) f
          CROSS JOIN LATERAL ({WAKE_HELD_SQL}) w)
    RETURNING id, queue
"""


def successor_enqueue(*, channel: str, woken: int, queue: str) -> None:
    """Publish the send of a delivery woken on `channel` (call after commit)."""
    delivery_enqueue(
        delivery_id=woken,
        channel=channel,
        queue=queue,
        # A push goes as a retry: without a free push slot it waits for the sweeper
        # instead of being dropped.
        retry=channel in PUSH_CHANNELS,
        push_owner=None,
        mark_enqueued=False,
    )


def successors_enqueue(*, woken: Sequence[tuple[str, str, int]]) -> None:
    """Publish the sends of the deliveries a round's record woke, (queue, channel, id)
    each (call after commit): a channel's in batches, as routing publishes first sends,
    rather than a message each. A burst to many people wakes as many successors as the
    round had members; one message each would make as many single sends, each taking
    its channel's sender for one delivery (and its line, which then overflows). A push
    goes on its own, through its per-recipient slot."""
    batched: list[tuple[int, str, str]] = []
    for queue, channel, woken_id in woken:
        if channel in PUSH_CHANNELS:
            successor_enqueue(channel=channel, woken=woken_id, queue=queue)
        else:
            batched.append((woken_id, channel, queue))
    if batched:
        deliveries_enqueue(started=batched, push_owners={})


def successor_wake(*, delivery: Delivery) -> list[int]:
    """The delivery is done with without an attempt row (superseded, skipped): publish
    at once what it held for the same person and channel (the next held one of each order
    rank it may hold), rather than leave it to its countdown, so a burst to one person
    goes out one after another without gaps. (After a try, `attempts_record` does the
    same inside the attempt row's INSERT.)

    One statement; returns the ids woken. Each is checked again by its claim as usual.
    Rows from before per-recipient order hold nothing.
    """
    if delivery.recipient_id is None:
        return []
    params = {
        "wake_now": timezone.now(),
        "wake_recipient": delivery.recipient_id,
        "wake_channel": delivery.channel,
        "wake_queue": delivery.queue,
        "wake_occurred": delivery.occurred_at,
        "wake_accepted": delivery.accepted_at,
        "wake_notification": delivery.notification_id,
    }
    with connection.cursor() as cursor:
        cursor.execute(_WAKE_SQL, params)
        rows = cursor.fetchall()
    for woken, queue in rows:
        successor_enqueue(channel=delivery.channel, woken=woken, queue=queue)
    return [woken for woken, _ in rows]
