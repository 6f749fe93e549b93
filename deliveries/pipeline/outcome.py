"""Recording an attempt's outcome: the attempt row and the delivery's next state, written
together, and what follows (a retry message). A delivery that ended dead is reported
with its channel and notification, for the caller to try the category's fallback
channel (`deliveries_fallback` in deliveries/pipeline/routing.py)."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import Enum
from functools import cache
from typing import Any, NamedTuple

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from deliveries.changes import Ride, Subject, changes_announce, changes_ride, subject_loaded
from deliveries.channels.base import SendResult
from deliveries.models import AttemptOutcome, Delivery, DeliveryStatus, Reason
from deliveries.pipeline.devices import devices_gone_deactivate
from deliveries.pipeline.enqueue import delivery_enqueue
from deliveries.pipeline.ordering import successors_enqueue
from deliveries.pipeline.outcome_log import delivery_outcomes_log
from deliveries.pipeline.record_sql import (
    OUTCOME_COLUMNS,
    OUTCOMES_BY_KEY_SQL,
    record_sql,
)
from deliveries.pipeline.retry import RetryDecision, RetryKind, decide_retry
from deliveries.pipeline.suppression import address_suppress
from flow.fairness import push_slot_member, push_slots_release
from notify.models import PUSH_CHANNELS
from pgarrays import array_literal

logger = logging.getLogger(__name__)


class AttemptResult(Enum):
    DELIVERED = "delivered"
    RETRY_SCHEDULED = "retry_scheduled"
    FAILED = "failed"
    DEAD = "dead"
    EXPIRED = "expired"
    NOT_CLAIMED = "not_claimed"  # someone else has it, or it is already final
    EARLY = "early"  # the message arrived before next_attempt_at
    SKIPPED_LIVE = "skipped_live"  # the device is on the live stream: no push
    POSTPONED = "postponed"  # breaker open or no rate token: back later, not charged
    HELD = "held"  # an earlier delivery to the same person on this channel is on its way
    SUPERSEDED = "superseded"  # a newer event about the same subject got there first


@dataclass(frozen=True)
class AttemptReport:
    result: AttemptResult
    delivery_id: int
    queue: str = ""  # the delivery's queue class, for a dead letter of a batch member
    channel: str = ""  # with the notification: where a dead delivery may fall back from
    notification_id: object = None  # None: no outcome written (the claim was taken over)


@dataclass(frozen=True)
class Handover:
    """A provider's answer after which the delivery went to the channel's next provider
    in the same round (deliveries/pipeline/failover.py): its own attempt row."""

    provider: str
    result: SendResult
    started_at: datetime
    duration: int


@dataclass(frozen=True)
class Tried:
    """One claimed delivery's try, to be recorded (see `attempts_record`).

    `uncharged`: a failed half-open probe. The provider is still down, so the delivery
    waits out another cool-down like the others, and the try is not counted against
    its budget (a long outage must not kill whichever delivery happened to probe).
    `held`: milliseconds it was held back for an earlier delivery before this try.
    """

    delivery: Delivery
    result: SendResult
    reason: str
    claimed_at: datetime
    started_at: datetime
    duration: int
    uncharged: bool = False
    held: int = 0
    provider: str = ""  # the provider of this try (its attempt row names it)
    handovers: tuple[Handover, ...] = ()  # the providers tried before it in its round
    pin: str | None = None  # a provider to keep the delivery with (an unknown outcome)


def attempts_record(tries: Sequence[Tried]) -> list[AttemptReport]:
    """Write every try's attempt row and its delivery's next state, for a whole batch in
    one statement, and wake the next delivery held behind each (it is no longer on its
    way).

    Each delivery gets its own next state and, when it is retried, its own countdown:
    one member's failure never fails or retries its batch-mates. Only the holder of the
    current claim writes an outcome; a sweeper may have given a stale claim to someone
    else meanwhile (the attempt row is kept either way).
    """
    if not tries:
        return []
    now = timezone.now()
    planned = [(tried, *_next_state(tried, now)) for tried in tries]
    _push_slots_release([t.delivery for t in tries if t.delivery.channel in PUSH_CHANNELS])
    providers = {t.delivery.pk: t.provider for t in tries if t.provider}
    carried = cache(lambda: _subjects(planned))  # for the ride and the announcement

    # The analytics events ride in the record's statement, for the outcomes it writes.
    ride = changes_ride(
        deliveries=[(t.delivery.pk, t.delivery.accepted_at, changes["status"])
                    for t, _, changes, _ in planned],
        providers=providers, subjects=carried, written="outcome",
    )  # fmt: skip
    with transaction.atomic():
        woken, updated, ridden = _record(tries, planned, now, ride)
        # The round's final outcomes, announced (the status webhooks write their events in
        # one statement, none when nobody subscribes: webhooks/events.py).
        changes_announce(
            deliveries=[(t.delivery.pk, t.delivery.accepted_at, changes["status"])
                        for t, _, changes, _ in planned if t.delivery.pk in updated],
            providers=providers, subjects=carried, ridden=ridden,
        )  # fmt: skip
        # A device the provider proved gone is deactivated whoever holds the claim now.
        devices_gone_deactivate(answers=[(t.delivery.channel, t.delivery.target, t.result)
                                         for t in tries])  # fmt: skip
        if woken:
            transaction.on_commit(lambda: successors_enqueue(woken=woken))
        for tried, _, _, countdown in planned:
            delivery = tried.delivery
            if delivery.pk not in updated:
                continue
            if tried.result.hard_bounce:
                # The address itself is dead: later deliveries to it are not tried.
                address_suppress(
                    channel=delivery.channel,
                    address=delivery.target,
                    evidence=_error_text(tried.result),
                )
            if countdown is not None:
                transaction.on_commit(lambda d=delivery, c=countdown: _retry_enqueue(d, c))
    reports = []
    for tried, outcome, _, _ in planned:
        delivery = tried.delivery
        if delivery.pk not in updated:
            logger.warning(
                "delivery %s: claim was taken over; outcome %s kept as attempt only",
                delivery.pk,
                tried.result.outcome,
            )
        reports.append(
            AttemptReport(
                outcome,
                delivery.pk,
                delivery.queue,
                delivery.channel,
                delivery.notification_id if delivery.pk in updated else None,
            )
        )
    delivery_outcomes_log(
        [(t.delivery, changes["status"], changes["reason"] or "", t.duration)
         for t, _, changes, _ in planned]
    )  # fmt: skip
    return reports


def _push_slots_release(deliveries: Sequence[Delivery]) -> None:
    """These push jobs are over; a retry takes a slot again when it is queued. One
    Redis round trip for the round, not one per delivery."""
    push_slots_release(
        slots=[
            (
                delivery.notification.recipient_id,
                push_slot_member(
                    channel=delivery.channel,
                    delivery_id=delivery.pk,
                    notification_id=delivery.notification_id,
                ),
            )
            for delivery in deliveries
        ]
    )


def _retry_enqueue(delivery: Delivery, countdown: float) -> None:
    delivery_enqueue(
        delivery_id=delivery.pk,
        channel=delivery.channel,
        queue=delivery.queue,
        countdown=countdown,
        retry=True,
        push_owner=(delivery.notification.recipient_id, delivery.notification_id),
    )


def _record(
    tries: Sequence[Tried], planned: Sequence[tuple], now: datetime, ride: Ride
) -> tuple[list[tuple], set[int], frozenset[int]]:
    """Insert the attempt rows, write each delivery's next state (only where its claim
    is still ours) and wake what was held behind them, with what rides along. Returns
    the woken (queue, channel, id), whose messages are published after commit, when
    these deliveries' outcomes are visible, the ids whose outcome was written, and those
    of them whose changes rode (written by the first statement, not the by-key one)."""
    ordered = [t.delivery for t in tries]  # rows from before per-recipient order: no wake
    rows = _attempt_rows(tries)
    params: dict[str, Any] = {
        "delivery": array_literal([row.tried.delivery.pk for row in rows]),
        "number": array_literal([row.number for row in rows]),
        "started_at": array_literal([row.started_at for row in rows]),
        "duration": array_literal([row.duration for row in rows]),
        "outcome": array_literal([str(row.result.outcome) for row in rows]),
        "status_code": array_literal([row.result.status_code[:32] for row in rows]),
        "response": array_literal([row.result.response for row in rows]),
        "held": array_literal([row.tried.held for row in rows]),
        "accepted_at": array_literal([row.tried.delivery.accepted_at for row in rows]),
        "attempt_message_id": array_literal([row.result.provider_message_id[:255] for row in rows]),
        "provider": array_literal([row.provider for row in rows]),
        "w_recipient": array_literal([d.recipient_id for d in ordered]),
        "w_channel": array_literal([d.channel for d in ordered]),
        "w_queue": array_literal([d.queue for d in ordered]),
        "w_occurred": array_literal([d.occurred_at for d in ordered]),
        "w_accepted": array_literal([d.accepted_at for d in ordered]),
        "w_notification": array_literal([d.notification_id for d in ordered]),
        "now": now,
    }
    columns: dict[str, list] = {name: [] for name in OUTCOME_COLUMNS}
    for tried, _, changes, _ in planned:
        columns["id"].append(tried.delivery.pk)
        columns["month"].append(tried.delivery.accepted_at)
        columns["claimed_at"].append(tried.claimed_at)
        for name in ("status", "last_error", "reason", "provider_message_id", "finished_at",
                     "next_attempt_at"):  # fmt: skip
            columns[name].append(changes.get(name))
        columns["clear_enqueued"].append(changes.get("clear_enqueued", False))
        columns["bump"].append(changes.get("bump", 0))
        columns["handovers"].append(len(tried.handovers))
        columns["pin"].append(tried.pin)
    params.update((name, array_literal(values)) for name, values in columns.items())
    woken: list[tuple] = []
    updated: set[int] = set()
    if ride.ctes:
        params.update(ride.params)
    with connection.cursor() as cursor:
        cursor.execute(record_sql(ride.ctes), params)
        for queue, channel, pk, is_outcome in cursor.fetchall():
            if is_outcome:
                updated.add(pk)
            else:
                woken.append((queue, channel, pk))
        ridden = frozenset(updated) if ride.ctes else frozenset()
        moved = [i for i, pk in enumerate(columns["id"]) if pk not in updated]
        if moved:  # changed by another transaction since this statement began, or lost
            by_key = {name: array_literal([values[i] for i in moved])
                      for name, values in columns.items()}  # fmt: skip
            cursor.execute(OUTCOMES_BY_KEY_SQL, {**by_key, "now": now})
            updated.update(row[0] for row in cursor.fetchall())
    return woken, updated, ridden


class _AttemptRow(NamedTuple):
    tried: Tried
    number: int
    result: SendResult
    started_at: datetime
    duration: int
    provider: str


def _attempt_rows(tries: Sequence[Tried]) -> list[_AttemptRow]:
    """Every try's attempt rows: one per provider it was handed over from in its round,
    numbered on from its claim's, then its own."""
    rows: list[_AttemptRow] = []
    for tried in tries:
        number = tried.delivery.attempts
        for handover in tried.handovers:
            rows.append(_AttemptRow(tried, number, handover.result, handover.started_at,
                                    handover.duration, handover.provider))  # fmt: skip
            number += 1
        rows.append(_AttemptRow(tried, number, tried.result, tried.started_at, tried.duration,
                                tried.provider))  # fmt: skip
    return rows


def _next_state(tried: Tried, now: datetime) -> tuple[AttemptResult, dict[str, Any], float | None]:
    """(what happened, the delivery's changes, a retry countdown to publish or None).

    The changes name only what the outcome sets; `_record` keeps the rest.
    """
    delivery, result = tried.delivery, tried.result
    # A retry counts from when its own try ended, not from when its round was recorded.
    tried_at = min(now, tried.started_at + timedelta(milliseconds=tried.duration))
    changes: dict[str, Any] = {"last_error": "", "reason": None}
    if result.outcome == AttemptOutcome.DELIVERED:
        changes.update(
            status=DeliveryStatus.DELIVERED,
            reason="",
            provider_message_id=result.provider_message_id,
            finished_at=now,
        )
        return AttemptResult.DELIVERED, changes, None
    if result.outcome == AttemptOutcome.PERMANENT:
        changes.update(
            status=DeliveryStatus.FAILED,
            reason=tried.reason or Reason.REJECTED,
            last_error=_error_text(result),
            finished_at=now,
        )
        return AttemptResult.FAILED, changes, None
    if result.give_up:
        decision = RetryDecision(RetryKind.EXHAUSTED)
    elif tried.uncharged:
        cooldown = settings.NOTIFY_BREAKER_COOLDOWN
        decision = RetryDecision(RetryKind.RETRY, cooldown, tried_at + timedelta(seconds=cooldown))
        changes["bump"] = 1
    else:
        decision = decide_retry(
            channel=delivery.channel,
            attempt=delivery.attempts - delivery.attempt_budget_from,
            now=tried_at,
            deadline=delivery.deadline,
            retry_after=result.retry_after,
        )
    changes["last_error"] = _error_text(result)
    if decision.kind is RetryKind.RETRY:
        changes.update(status=DeliveryStatus.RETRYING, next_attempt_at=decision.next_attempt_at)
        if decision.delay <= settings.NOTIFY_RETRY_COUNTDOWN_MAX:
            return AttemptResult.RETRY_SCHEDULED, changes, decision.delay
        changes["clear_enqueued"] = True  # no message: the sweeper owns this wait
        return AttemptResult.RETRY_SCHEDULED, changes, None
    if decision.kind is RetryKind.EXHAUSTED:
        reason = tried.reason or Reason.RETRIES_EXHAUSTED  # the sweeper's says why it ends
        changes.update(status=DeliveryStatus.DEAD, reason=reason, finished_at=now)
        return AttemptResult.DEAD, changes, None
    changes.update(status=DeliveryStatus.EXPIRED, reason=Reason.DEADLINE_PASSED, finished_at=now)
    return AttemptResult.EXPIRED, changes, None


def _subjects(planned: Sequence[tuple]) -> dict[int, Subject]:
    """What the round's loaded deliveries are about, for the listeners (those a sweeper
    tried without loading their notification are left out: a listener reads them)."""
    subjects: dict[int, Subject] = {}
    for tried, _, changes, _ in planned:
        delivery = tried.delivery
        subject = subject_loaded(delivery, reason=changes.get("reason"))
        if subject is not None:
            subjects[delivery.pk] = subject
    return subjects


def _error_text(result: SendResult) -> str:
    return f"{result.status_code} {result.response}".strip()
