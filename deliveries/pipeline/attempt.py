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
from collections.abc import Callable, Sequence
from datetime import datetime

from django.conf import settings
from django.utils import timezone

from deliveries.channels import provider_for
from deliveries.channels.base import SendResult
from deliveries.models import Delivery, Reason
from deliveries.pipeline.claim import (
    Loaded,
    Refusal,
    deliveries_claim,
    deliveries_load,
    deliveries_maybe_live,
    delivery_claim_refused,
    delivery_skip_if_live,
)
from deliveries.pipeline.digests import digest_contexts_attach
from deliveries.pipeline.failover import channel_providers, delivery_providers
from deliveries.pipeline.ordering import (
    delivery_hold,
    delivery_supersede,
    hold_countdown,
    newer_delivered,
    order_rank,
    successor_wake,
)
from deliveries.pipeline.outcome import AttemptReport, AttemptResult, Tried, attempts_record
from deliveries.pipeline.pressure import (
    delivery_postpone,
    provider_admissions,
)
from deliveries.pipeline.provider_calls import Call, order_lane, provider_calls, tried
from flow.priority import low_work_done, low_work_yield
from preferences.gate import gate_seal_valid

logger = logging.getLogger(__name__)


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
    it is slow; the first is the size the last batch through the same channels in this
    process ended at (`round_size_start`). So a pause or a cancel reaches the rest of a
    batch within a round (what it holds is no longer claimable), and a worker killed
    mid-batch leaves at most one round sent but not recorded — the window in which a
    send may be repeated, as a single send has between the provider's answer and its
    record. A provider that sends a batch in one call (FCM's multicast) takes the whole
    batch as one round; one that keeps calls in flight together (Web Push) starts with
    as many as it keeps.
    """
    if loaded is None:
        loaded = list(deliveries_load(delivery_ids=delivery_ids).values())
    # A digest's carrier renders with its window's events (nothing when none is one).
    digest_contexts_attach([item.delivery for item in loaded])
    loaded = sorted(loaded, key=_order_key)
    reports: list[AttemptReport] = []
    # order lane -> order rank -> the first of its members of that rank that did not go
    waiting: dict[tuple, dict[int, tuple]] = {}
    channels = frozenset(item.delivery.channel for item in loaded)
    size = round_size_start(channels)
    providers = [provider_for(channel) for channel in channels]
    if any(hasattr(provider, "send_many") for provider in providers):
        size = len(loaded)  # a multicast is one call: the batch is its one round
    in_flight = [getattr(provider, "calls_in_flight", None) for provider in providers]
    if in_flight and all(in_flight):
        # Providers that keep calls in flight together (Web Push) start with a round
        # that fills what they keep in flight: a smaller one leaves them idle while
        # its claim and record go to the database.
        size = max(size, min(calls() for calls in in_flight))
    # Inside a batch every message a provider takes is marked sent until its round is
    # recorded (deliveries/pipeline/sent_marks.py); a lone send records at once.
    mark_sent = len(loaded) > 1
    start = 0
    while start < len(loaded):
        members = loaded[start : start + size]
        start += size
        clock = time.monotonic()
        reports.extend(_round(members, waiting, between, mark_sent=mark_sent))
        elapsed = time.monotonic() - clock
        full = len(members) == size
        size = _round_size_next(size, elapsed)
        # A round that filled its size, or took too long, tells the next batch where to
        # start, in proportion to the members it had; a short last round that went fast
        # tells nothing (a lone retry must not bring a campaign's next batch back to two
        # members, nor lift it unbounded).
        if full or elapsed > settings.NOTIFY_BATCH_ROUND_SECONDS:
            _round_sizes[channels] = _round_size_next(len(members), elapsed)
    return reports


# channels of a batch -> the round size the last batch through them in this process
# ended at. A campaign's batches follow each other through one worker: each starting
# again at NOTIFY_BATCH_ROUND_START spent most of its rounds (each a claim, a record and
# a commit) on its first few dozen members. Starting where the last one ended still
# adapts within the batch: a provider that turned slow makes the first round take about
# as many times NOTIFY_BATCH_ROUND_SECONDS as it got slower, and the next shrinks in
# proportion. Never more than twice a round that ran full, so a batch's length bounds it.
_round_sizes: dict[frozenset[str], int] = {}


def round_size_start(channels: frozenset[str]) -> int:
    """The first round's size for a batch through these channels: where the last such
    batch in this process ended, or NOTIFY_BATCH_ROUND_START before there was one."""
    return _round_sizes.get(channels, settings.NOTIFY_BATCH_ROUND_START)


def round_sizes_forget() -> None:
    """Forget the round sizes learned so far: each batch starts at
    NOTIFY_BATCH_ROUND_START until one ends again (tests that set it start clean)."""
    _round_sizes.clear()


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
    # A device live on the stream got the notification there; checked before the claim
    # (no claim taken) and right after it (the claim is given back). Whose device is
    # live is read for the whole round at once: only those are looked at one by one.
    live = deliveries_maybe_live(deliveries=[item.delivery for item in members])
    for item in members:
        if item.delivery.pk in live and delivery_skip_if_live(
            delivery=item.delivery, claimed_at=None
        ):
            successor_wake(delivery=item.delivery)  # done with: the next one may go
            reports.append(_report(AttemptResult.SKIPPED_LIVE, item.delivery))
        else:
            candidates.append(item)
    claimed = deliveries_claim(loaded=candidates, now=now)
    live = deliveries_maybe_live(
        deliveries=[item.delivery for item in candidates if item.delivery.pk in claimed]
    )
    checked: list[Loaded] = []
    for item in candidates:
        delivery = item.delivery
        if delivery.pk not in claimed:
            reports.append(_refused(item, now))
            _did_not_go(waiting, item)
        elif _behind(waiting, item):
            reports.append(_wait_behind(delivery, now))
        elif delivery.pk in live and delivery_skip_if_live(delivery=delivery, claimed_at=now):
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
            tries.append(tried(item, result, reason, now, started_at, duration=0))
        else:
            going.append((item, started_at))
    calls: list[Call] = []
    # One breaker-and-bucket round trip per provider breaker and queue for the round.
    admissions = provider_admissions(
        sends=[
            (item.delivery.channel, item.delivery.queue, item.delivery.target) for item, _ in going
        ],
        candidates=_failover_candidates(going, now),
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
        calls.append(Call(item, admission, started_at))
    tries.extend(provider_calls(calls, claimed_at=now, between=between, mark_sent=mark_sent))
    return reports + attempts_record(tries)


def _failover_candidates(
    going: Sequence[tuple[Loaded, datetime]], now: datetime
) -> list[list[str]] | None:
    """Each send's providers in order, for a channel that fails over between several
    (None when none of the round's channels does: the default costs nothing more)."""
    lists = {item.delivery.channel: channel_providers(item.delivery.channel) for item, _ in going}
    if not any(lists.values()):
        return None
    return [
        delivery_providers(delivery=item.delivery, providers=lists[item.delivery.channel], now=now)
        if lists[item.delivery.channel]
        else []
        for item, _ in going
    ]


def _order_key(item: Loaded) -> tuple:
    """Per-recipient order: by the event's time, then acceptance, then notification id."""
    delivery = item.delivery
    return (
        delivery.occurred_at or delivery.accepted_at,
        delivery.accepted_at,
        str(delivery.notification_id),
        delivery.pk,
    )


def _did_not_go(waiting: dict[tuple, dict[int, tuple]], item: Loaded) -> None:
    """Note that this member did not go now: its lane's later members that it may hold
    (ordering.ORDER_RANKS) wait behind it."""
    firsts = waiting.setdefault(order_lane(item.delivery), {})
    rank, key = order_rank(item.delivery.queue), _order_key(item)
    if rank not in firsts or key < firsts[rank]:
        firsts[rank] = key


def _behind(waiting: dict[tuple, dict[int, tuple]], item: Loaded) -> bool:
    """An earlier member of this one's lane that may hold it did not go now."""
    rank, key = order_rank(item.delivery.queue), _order_key(item)
    firsts = waiting.get(order_lane(item.delivery), {})
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
