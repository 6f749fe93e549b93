"""One attempt at each delivery of a batch: load, claim, check, call the provider, record.

Every send goes through `deliveries_attempt` — a single delivery is a batch of one, a
channel's batch from a route or a campaign is many — so every member gets the same
checks: the live stream, the claim (with per-recipient order), supersede, the gate's
seal, the template, the deadline, the breaker and the rate limit (charged per message).

The delivery row is the write-ahead record: the claim (`queued|retrying → sending`)
makes a duplicate or early message harmless, and each outcome and next attempt is
written before any message about it is published. A batch costs the same three
statements whatever its size (load, claim, and the record of attempt rows and
outcomes); what is rare (a refused claim, a postponed send, a superseded event) costs
its own.
"""

from __future__ import annotations

import logging
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime

from django.conf import settings
from django.template import TemplateSyntaxError
from django.utils import timezone

from deliveries.channels import provider_for
from deliveries.channels.base import SendResult
from deliveries.models import AttemptOutcome, Delivery, Reason
from deliveries.pipeline.claim import (
    Loaded,
    Refusal,
    deliveries_claim,
    deliveries_load,
    delivery_claim_refused,
    delivery_skip_if_live,
)
from deliveries.pipeline.digests import digest_contexts_attach
from deliveries.pipeline.ordering import (
    delivery_hold,
    delivery_supersede,
    held_ms,
    hold_countdown,
    newer_delivered,
    order_rank,
    successor_wake,
)
from deliveries.pipeline.outcome import AttemptReport, AttemptResult, Tried, attempts_record
from deliveries.pipeline.pressure import (
    Admission,
    delivery_postpone,
    provider_admissions,
    provider_outcomes,
)
from deliveries.pipeline.senders import channel_call_begin, channel_call_timed
from deliveries.pipeline.sent_marks import SentMarks
from notify.priority import low_work_done, low_work_yield
from preferences.gate import gate_seal_valid
from templates_admin.bounds import RenderLimitExceeded
from templates_admin.rendering import DIGEST_VARIABLE, recipient_context

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class _Call:
    """A claimed member that passed every check and may call its provider."""

    loaded: Loaded
    admission: Admission
    started_at: datetime


def delivery_attempt(*, delivery_id: int) -> AttemptReport:
    """Run one attempt of a delivery if it is due and unclaimed (a batch of one)."""
    reports = deliveries_attempt(delivery_ids=[delivery_id])
    if not reports:
        raise Delivery.DoesNotExist(f"delivery {delivery_id} does not exist")
    return reports[0]


def deliveries_attempt(
    *,
    delivery_ids: Sequence[int] = (),
    loaded: Sequence[Loaded] | None = None,
    between: Callable[[], object] | None = None,
) -> list[AttemptReport]:
    """One attempt at each of these deliveries that is due and unclaimed; one report
    each (ids that no longer exist have none). `loaded` instead of `delivery_ids`: the
    members as their caller has them already (the route, which just wrote them), which
    spares the load statement; they are claimed and checked like any.

    Members are sent in per-recipient order. A member whose earlier batch-mate (same
    person, same channel) did not go now waits behind it, as it would behind any earlier
    delivery. `between` runs before each provider call (campaign work yields to login
    codes there).

    The batch goes in rounds (claim, send, record) of about NOTIFY_BATCH_ROUND_SECONDS
    each: a round grows while the provider answers fast and shrinks to one member when
    it is slow. So a pause or a cancel reaches the rest of a batch within a round (what
    it holds is no longer claimable), and a worker killed mid-batch leaves at most one
    round sent but not recorded — the window in which a send may be repeated, as a
    single send has between the provider's answer and its record. A provider that sends
    a batch in one call (FCM's multicast) takes the whole batch as one round.
    """
    if loaded is None:
        loaded = list(deliveries_load(delivery_ids=delivery_ids).values())
    # A digest's carrier renders with its window's events (nothing when none is one).
    digest_contexts_attach([item.delivery for item in loaded])
    loaded = sorted(loaded, key=_order_key)
    reports: list[AttemptReport] = []
    # order lane -> order rank -> the first of its members of that rank that did not go
    waiting: dict[tuple, dict[int, tuple]] = {}
    size = settings.NOTIFY_BATCH_ROUND_START
    channels = {item.delivery.channel for item in loaded}
    if any(hasattr(provider_for(channel), "send_many") for channel in channels):
        size = len(loaded)  # a multicast is one call: the batch is its one round
    # Inside a batch every message a provider takes is marked sent until its round is
    # recorded (deliveries/pipeline/sent_marks.py); a lone send records at once.
    mark_sent = len(loaded) > 1
    start = 0
    while start < len(loaded):
        members = loaded[start : start + size]
        start += size
        clock = time.monotonic()
        reports.extend(_round(members, waiting, between, mark_sent=mark_sent))
        size = _round_size_next(size, time.monotonic() - clock)
    return reports


def _round_size_next(size: int, elapsed: float) -> int:
    """The next round's size: doubled while a round takes under half its time, cut in
    proportion when it takes longer, never under one member."""
    target = settings.NOTIFY_BATCH_ROUND_SECONDS
    if elapsed < target / 2:
        return size * 2
    if elapsed > target:
        return max(1, int(size * target / elapsed))
    return size


def _round(
    members: Sequence[Loaded],
    waiting: dict[tuple, dict[int, tuple]],
    between: Callable[[], object] | None,
    *,
    mark_sent: bool,
) -> list[AttemptReport]:
    """Claim, check, send and record these members (statements: one claim, one to
    record, whatever their number)."""
    now = timezone.now()
    reports: list[AttemptReport] = []
    candidates: list[Loaded] = []
    for item in members:
        # A device live on the stream got the notification there; checked before the
        # claim (no claim taken) and right after it (the claim is given back).
        if delivery_skip_if_live(delivery=item.delivery, claimed_at=None):
            successor_wake(delivery=item.delivery)  # done with: the next one may go
            reports.append(_report(AttemptResult.SKIPPED_LIVE, item.delivery))
        else:
            candidates.append(item)
    claimed = deliveries_claim(loaded=candidates, now=now)
    checked: list[Loaded] = []
    for item in candidates:
        delivery = item.delivery
        if delivery.pk not in claimed:
            reports.append(_refused(item, now))
            _did_not_go(waiting, item)
        elif _behind(waiting, item):
            reports.append(_wait_behind(delivery, now))
        elif delivery_skip_if_live(delivery=delivery, claimed_at=now):
            successor_wake(delivery=delivery)
            reports.append(_report(AttemptResult.SKIPPED_LIVE, delivery))
        elif newer_delivered(delivery=delivery) and delivery_supersede(
            delivery=delivery, claimed_at=now
        ):
            # An older event than one the person already got here about the same subject.
            successor_wake(delivery=delivery)
            reports.append(_report(AttemptResult.SUPERSEDED, delivery))
        else:
            checked.append(item)
    tries: list[Tried] = []
    going: list[tuple[Loaded, datetime]] = []
    for item in checked:
        started_at = timezone.now()
        refused = _refused_before_call(item, started_at)
        if refused is not None:
            result, reason = refused
            tries.append(_tried(item, result, reason, now, started_at, duration=0))
        else:
            going.append((item, started_at))
    calls: list[_Call] = []
    # One breaker-and-bucket round trip per provider breaker and queue for the round.
    admissions = provider_admissions(
        sends=[
            (item.delivery.channel, item.delivery.queue, item.delivery.target) for item, _ in going
        ]
    )
    for (item, started_at), admission in zip(going, admissions, strict=True):
        delivery = item.delivery
        if _behind(waiting, item):  # its admission goes unused: a token, rarely
            reports.append(_wait_behind(delivery, now))
            continue
        if not admission.allowed:
            delivery_postpone(
                delivery=delivery,
                claimed_at=now,
                wait_seconds=admission.wait_seconds,
                why=admission.why,
            )
            _did_not_go(waiting, item)
            reports.append(_report(AttemptResult.POSTPONED, delivery))
            continue
        calls.append(_Call(item, admission, started_at))
    tries.extend(_provider_calls(calls, claimed_at=now, between=between, mark_sent=mark_sent))
    return reports + attempts_record(tries)


def _order_key(item: Loaded) -> tuple:
    """Per-recipient order: by the event's time, then acceptance, then notification id."""
    delivery = item.delivery
    return (
        delivery.occurred_at or delivery.accepted_at,
        delivery.accepted_at,
        str(delivery.notification_id),
        delivery.pk,
    )


def _order_lane(delivery: Delivery) -> tuple:
    """Deliveries that keep an order among themselves: one person's, on one channel.
    Rows from before per-recipient order keep none (a lane of their own)."""
    if delivery.recipient_id is None:
        return ("unordered", delivery.pk)
    return (delivery.recipient_id, delivery.channel)


def _did_not_go(waiting: dict[tuple, dict[int, tuple]], item: Loaded) -> None:
    """Note that this member did not go now: its lane's later members that it may hold
    (ordering.ORDER_RANKS) wait behind it."""
    firsts = waiting.setdefault(_order_lane(item.delivery), {})
    rank, key = order_rank(item.delivery.queue), _order_key(item)
    if rank not in firsts or key < firsts[rank]:
        firsts[rank] = key


def _behind(waiting: dict[tuple, dict[int, tuple]], item: Loaded) -> bool:
    """An earlier member of this one's lane that may hold it did not go now."""
    rank, key = order_rank(item.delivery.queue), _order_key(item)
    firsts = waiting.get(_order_lane(item.delivery), {})
    return any(first < key for held_rank, first in firsts.items() if held_rank <= rank)


def _report(result: AttemptResult, delivery: Delivery) -> AttemptReport:
    return AttemptReport(result, delivery.pk, delivery.queue)


def _refused(item: Loaded, now: datetime) -> AttemptReport:
    """A claim refused: why, and what follows (an early message is put back, a held
    delivery looks again later)."""
    delivery = item.delivery
    refusal = delivery_claim_refused(delivery_id=delivery.pk, now=now)
    if refusal is Refusal.HELD and delivery_hold(delivery=delivery, now=now):
        return _report(AttemptResult.HELD, delivery)
    result = AttemptResult.EARLY if refusal is Refusal.EARLY else AttemptResult.NOT_CLAIMED
    return _report(result, delivery)


def _wait_behind(delivery: Delivery, claimed_at: datetime) -> AttemptReport:
    """Claimed, but an earlier batch-mate to the same person on this channel did not go:
    the claim is given back uncharged, and the delivery looks again shortly."""
    delivery_postpone(
        delivery=delivery,
        claimed_at=claimed_at,
        wait_seconds=hold_countdown(waited=0.0),
        why="held for an earlier delivery",
    )
    return _report(AttemptResult.HELD, delivery)


def _refused_before_call(item: Loaded, now: datetime) -> tuple[SendResult, str] | None:
    """A member that must not reach its provider: not sealed by the gate, no template,
    or past its deadline. None when it may go."""
    delivery = item.delivery
    if not gate_seal_valid(
        notification_id=delivery.notification_id,
        channel=delivery.channel,
        target=delivery.target,
        seal=delivery.gate_seal,
    ):
        refused = SendResult.permanent(response="refused: this delivery did not pass the gate")
        return refused, Reason.NOT_GATED
    if item.version is None:
        return SendResult.permanent(response="no published template for this channel"), (
            Reason.NO_TEMPLATE
        )
    if delivery.deadline is not None and now >= delivery.deadline:
        # Past its deadline (TTL) it is no longer useful: not sent late. Recorded as a
        # failed try, which the retry policy turns into `expired` (the deadline is behind us).
        return SendResult.transient(
            status_code="deadline", response="past its deadline; not sent"
        ), ""
    return None


def _tried(
    item: Loaded,
    result: SendResult,
    reason: str,
    claimed_at: datetime,
    started_at: datetime,
    *,
    duration: int,
    uncharged: bool = False,
) -> Tried:
    delivery = item.delivery
    return Tried(
        delivery,
        result,
        reason,
        claimed_at=claimed_at,
        started_at=started_at,
        duration=duration,
        uncharged=uncharged,
        held=held_ms(delivery=delivery, now=claimed_at),
    )


def _provider_calls(
    calls: Sequence[_Call],
    *,
    claimed_at: datetime,
    between: Callable[[], object] | None,
    mark_sent: bool,
) -> list[Tried]:
    """Render and send each call, by its provider's batching rule: a provider with
    `send_many` (FCM's multicast) takes the channel's members at once; one with
    `send_overlapped` (Web Push, SMPP) keeps several in flight, one person's still one
    after the other; the others take them one after another on their kept session (one
    SMTP connection), each message it took marked sent when `mark_sent` (a batch's)."""
    tries: list[Tried] = []
    by_channel: dict[str, list[_Call]] = {}
    for call in calls:
        by_channel.setdefault(call.loaded.delivery.channel, []).append(call)
    for channel, group in by_channel.items():
        tries.extend(
            _channel_calls(
                channel, group, claimed_at=claimed_at, between=between, mark_sent=mark_sent
            )
        )
    # The breaker hears of the round's calls at once (one round trip per breaker).
    outcomes = {t.delivery.pk: t.result.outcome for t in tries}
    provider_outcomes(
        outcomes=[(c.admission.breaker, outcomes[c.loaded.delivery.pk]) for c in calls]
    )
    return tries


def _channel_calls(
    channel: str,
    group: Sequence[_Call],
    *,
    claimed_at: datetime,
    between: Callable[[], object] | None,
    mark_sent: bool,
) -> list[Tried]:
    """One channel's calls of a round, by its provider's batching rule."""
    tries: list[Tried] = []
    provider = provider_for(channel)
    send_many = getattr(provider, "send_many", None)
    if send_many is not None:
        if between is not None:
            between()
        clock = time.monotonic()
        items = [(c.loaded.delivery, c.loaded.version, _context(c)) for c in group]
        channel_call_begin(channel=channel, count=len(group))
        try:
            answers = send_many(items)
        except Exception as error:  # the whole call failed: each member records it
            answers = [error] * len(group)
        results = [
            _classify_raised(a, c.loaded.delivery) if isinstance(a, Exception) else (a, "")
            for c, a in zip(group, answers, strict=True)
        ]
        duration = int((time.monotonic() - clock) * 1000)
        channel_call_timed(channel=channel, seconds=duration / 1000, count=len(group))
        for call, (result, reason) in zip(group, results, strict=True):
            tries.append(_after_call(call, result, reason, claimed_at, duration))
        return tries
    send_overlapped = getattr(provider, "send_overlapped", None)
    if send_overlapped is not None and len(group) > 1:
        return _overlapped_calls(
            channel, send_overlapped, group, claimed_at=claimed_at, between=between,
            mark_sent=mark_sent,
        )  # fmt: skip
    with SentMarks() as marks:
        for call in group:
            if between is not None:
                between()
            clock = time.monotonic()
            channel_call_begin(channel=channel)
            delivery = call.loaded.delivery
            try:
                result, reason = provider.send(delivery, call.loaded.version, _context(call)), ""
            except Exception as error:
                result, reason = _classify_raised(error, delivery)
            duration = int((time.monotonic() - clock) * 1000)
            channel_call_timed(channel=channel, seconds=duration / 1000)  # slowness limits it
            if mark_sent and result.outcome == AttemptOutcome.DELIVERED:
                # Recorded only with its round: until then, the mark speaks for it. The
                # last of the round too: its record still waits for the round's Redis
                # replies, the breaker and the statement, long enough for a kill.
                marks.add(
                    delivery_id=delivery.pk,
                    claimed_at=claimed_at,
                    provider_message_id=result.provider_message_id,
                )
            tries.append(_after_call(call, result, reason, claimed_at, duration))
    return tries


def _overlapped_calls(
    channel: str,
    send_overlapped: Callable,
    group: Sequence[_Call],
    *,
    claimed_at: datetime,
    between: Callable[[], object] | None,
    mark_sent: bool,
) -> list[Tried]:
    """A provider that keeps several calls in flight (Web Push's posts, SMPP's window):
    each answer is marked sent as it comes, and the tries are returned in order."""
    answers: dict[int, tuple[SendResult, str, int]] = {}
    clock = time.monotonic()
    channel_call_begin(channel=channel, count=len(group))
    with SentMarks() as marks:
        try:
            items = [(c.loaded.delivery, c.loaded.version, _context(c)) for c in group]
            lanes = [_order_lane(c.loaded.delivery) for c in group]
            for index, answer, seconds in send_overlapped(items, lanes=lanes, before_each=between):
                delivery = group[index].loaded.delivery
                if isinstance(answer, Exception):
                    result, reason = _classify_raised(answer, delivery)
                else:
                    result, reason = answer, ""
                if mark_sent and result.outcome == AttemptOutcome.DELIVERED:
                    marks.add(delivery_id=delivery.pk, claimed_at=claimed_at,
                              provider_message_id=result.provider_message_id)  # fmt: skip
                answers[index] = (result, reason, int(seconds * 1000))
        except Exception as error:  # the batch call itself failed: the rest record it
            for index, call in enumerate(group):
                if index not in answers:
                    answers[index] = (*_classify_raised(error, call.loaded.delivery), 0)
    # Slot time per message, as for a multicast: what a delivery costs the sender thread.
    channel_call_timed(channel=channel, seconds=time.monotonic() - clock, count=len(group))
    tries: list[Tried] = []
    for index, call in enumerate(group):
        result, reason, duration = answers[index]
        tries.append(_after_call(call, result, reason, claimed_at, duration))
    return tries


def _context(call: _Call) -> dict:
    delivery = call.loaded.delivery
    notification = delivery.notification
    context = recipient_context(notification.payload, notification.recipient)
    digest = getattr(delivery, "digest_context", None)
    if digest is not None:
        context[DIGEST_VARIABLE] = digest
    return context


def _after_call(
    call: _Call, result: SendResult, reason: str, claimed_at: datetime, duration: int
) -> Tried:
    """The try to record (the breaker hears of the round's calls at its end)."""
    probe_failed = call.admission.probe and result.outcome == AttemptOutcome.TRANSIENT
    return _tried(
        call.loaded,
        result,
        reason,
        claimed_at,
        call.started_at,
        duration=duration,
        uncharged=probe_failed,
    )


def _classify_raised(error: Exception, delivery: Delivery) -> tuple[SendResult, str]:
    """A provider call that raised: a template error fails for good (with its reason);
    anything else is a bug or an unclassified failure, recorded and retried."""
    if isinstance(error, RenderLimitExceeded):  # before TemplateSyntaxError, its base
        return SendResult.permanent(response=f"template error: {error}"), Reason.RENDER_LIMIT
    if isinstance(error, TemplateSyntaxError):
        return SendResult.permanent(response=f"template error: {error}"), Reason.RENDER_ERROR
    logger.exception("delivery %s: provider raised", delivery.pk, exc_info=error)
    text = "".join(traceback.format_exception_only(error)).strip()
    return SendResult.transient(status_code=type(error).__name__, response=text), ""


def campaign_yield_due() -> Callable[[], object]:
    """A `between` for a low batch: at most every NOTIFY_CAMPAIGN_YIELD_CHECK seconds,
    give the turn back and wait again while login codes are in flight, so a long
    campaign batch yields inside as a short task would between tasks. The process's
    sender threads share one reading of Redis per check interval."""
    last = [time.monotonic()]

    def between() -> None:
        check = settings.NOTIFY_CAMPAIGN_YIELD_CHECK
        if time.monotonic() - last[0] < check:
            return
        low_work_done()
        low_work_yield(fresh=check)
        last[0] = time.monotonic()

    return between
