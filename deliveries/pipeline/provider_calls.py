"""Calling the providers for the members of a round that passed every check: one call
per message, a multicast (`send_many`), or calls kept in flight together
(`send_overlapped`); each answer classified and turned into the try to record."""

from __future__ import annotations

import logging
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.template import TemplateSyntaxError

from deliveries.channels import provider_for
from deliveries.channels.base import ChannelProvider, SendResult
from deliveries.models import AttemptOutcome, Delivery, Reason
from deliveries.pipeline.claim import (
    Loaded,
)
from deliveries.pipeline.failover import (
    channel_providers,
    delivery_pin,
    handover_to,
    provider_latency_note,
)
from deliveries.pipeline.ordering import (
    held_ms,
)
from deliveries.pipeline.outcome import Handover, Tried
from deliveries.pipeline.pressure import (
    Admission,
    provider_outcomes,
)
from deliveries.pipeline.sent_marks import SentMarks
from flow.pace import channel_call_begin, channel_call_timed
from templates_admin.bounds import RenderLimitExceeded
from templates_admin.rendering import DIGEST_VARIABLE, recipient_context

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Call:
    """A claimed member that passed every check and may call its provider."""

    loaded: Loaded
    admission: Admission
    started_at: datetime


def order_lane(delivery: Delivery) -> tuple:
    """Deliveries that keep an order among themselves: one person's, on one channel.
    Rows from before per-recipient order keep none (a lane of their own)."""
    if delivery.recipient_id is None:
        return ("unordered", delivery.pk)
    return (delivery.recipient_id, delivery.channel)


def tried(
    item: Loaded,
    result: SendResult,
    reason: str,
    claimed_at: datetime,
    started_at: datetime,
    *,
    duration: int,
    uncharged: bool = False,
    provider: str = "",
    handovers: tuple[Handover, ...] = (),
    pin: str | None = None,
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
        provider=provider,
        handovers=handovers,
        pin=pin,
    )


def provider_calls(
    calls: Sequence[Call],
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
    by_channel: dict[str, list[Call]] = {}
    for call in calls:
        by_channel.setdefault(call.loaded.delivery.channel, []).append(call)
    for channel, group in by_channel.items():
        tries.extend(
            _channel_calls(
                channel, group, claimed_at=claimed_at, between=between, mark_sent=mark_sent
            )
        )
    # The breaker hears of the round's calls at once (one round trip per breaker); a
    # delivery handed over in its round counts once at each provider it tried.
    by_delivery = {t.delivery.pk: t for t in tries}
    outcomes: list[tuple[str | None, str]] = []
    for call in calls:
        done = by_delivery[call.loaded.delivery.pk]
        outcomes.extend((h.provider, h.result.outcome) for h in done.handovers)
        breaker = done.provider if done.handovers else call.admission.breaker
        outcomes.append((breaker, done.result.outcome))
    provider_outcomes(outcomes=outcomes)
    return tries


def _channel_calls(
    channel: str,
    group: Sequence[Call],
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
    failover = channel_providers(channel)
    # A channel that fails over sends one message at a time, each free to go on to the
    # next provider (SMS then leaves its window unused: the price of a second bind).
    if send_overlapped is not None and len(group) > 1 and not failover:
        return _overlapped_calls(
            channel, send_overlapped, group, claimed_at=claimed_at, between=between,
            mark_sent=mark_sent,
        )  # fmt: skip
    with SentMarks() as marks:
        for call in group:
            if between is not None:
                between()
            delivery = call.loaded.delivery
            via = call.admission.provider if failover else None
            result, reason, duration = _one_call(channel, provider, call, via)
            handovers: list[Handover] = []
            while failover and via is not None:  # one provider: never entered
                tried = [h.provider for h in handovers] + [via]
                handover = handover_to(delivery=delivery, result=result, tried=tried)
                if handover is None:
                    break
                started = _after(call.started_at, handovers)
                handovers.append(Handover(via, result, started, duration))
                via = handover
                result, reason, duration = _one_call(channel, provider, call, via)
            if mark_sent and result.outcome == AttemptOutcome.DELIVERED:
                # Recorded only with its round: until then, the mark speaks for it. The
                # last of the round too: its record still waits for the round's Redis
                # replies, the breaker and the statement, long enough for a kill.
                marks.add(
                    delivery_id=delivery.pk,
                    claimed_at=claimed_at,
                    provider_message_id=result.provider_message_id,
                )
            tries.append(
                _after_call(call, result, reason, claimed_at, duration, via, tuple(handovers))
            )
    return tries


def _one_call(
    channel: str, provider: ChannelProvider, call: Call, via: str | None
) -> tuple[SendResult, str, int]:
    """One call of the channel's provider (`via`: at this one of its providers); the
    result, its reason and the call's milliseconds."""
    clock = time.monotonic()
    channel_call_begin(channel=channel)
    delivery = call.loaded.delivery
    at = {} if via is None else {"via": via}  # a channel with one provider is called as ever
    try:
        result, reason = provider.send(delivery, call.loaded.version, _context(call), **at), ""
    except Exception as error:
        result, reason = _classify_raised(error, delivery)
    seconds = time.monotonic() - clock
    channel_call_timed(channel=channel, seconds=seconds)  # slowness limits it
    if via is not None:
        provider_latency_note(provider=via, seconds=seconds)
    return result, reason, int(seconds * 1000)


def _overlapped_calls(
    channel: str,
    send_overlapped: Callable,
    group: Sequence[Call],
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
            lanes = [order_lane(c.loaded.delivery) for c in group]
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


def _context(call: Call) -> dict:
    delivery = call.loaded.delivery
    notification = delivery.notification
    context = recipient_context(notification.payload, notification.recipient)
    digest = getattr(delivery, "digest_context", None)
    if digest is not None:
        context[DIGEST_VARIABLE] = digest
    return context


def _after_call(
    call: Call,
    result: SendResult,
    reason: str,
    claimed_at: datetime,
    duration: int,
    via: str | None = None,
    handovers: tuple[Handover, ...] = (),
) -> Tried:
    """The try to record (the breaker hears of the round's calls at its end), after any
    handovers to the channel's other providers in this round."""
    probe_failed = (
        call.admission.probe and not handovers and result.outcome == AttemptOutcome.TRANSIENT
    )
    provider = via or call.admission.provider or ""
    pin = None
    if via is not None:  # only a channel that fails over pins a delivery
        pin = delivery_pin(delivery=call.loaded.delivery, provider=provider, result=result)
    return tried(
        call.loaded,
        result,
        reason,
        claimed_at,
        _after(call.started_at, handovers),
        duration=duration,
        uncharged=probe_failed,
        provider=provider,
        handovers=handovers,
        pin=pin,
    )


def _after(started_at: datetime, handovers: Sequence[Handover]) -> datetime:
    """When the next call of a delivery began: after the handovers before it."""
    if not handovers:
        return started_at
    last = handovers[-1]
    return last.started_at + timedelta(milliseconds=last.duration)


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
