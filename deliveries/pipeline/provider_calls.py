"""Calling the providers for the members of a round that passed every check: one call
per message, a multicast (`send_many`), or calls kept in flight together
(`send_overlapped`); each answer classified and turned into the try to record."""

from __future__ import annotations

import logging
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime

from django.template import TemplateSyntaxError

from deliveries.channels import provider_for
from deliveries.channels.base import SendResult
from deliveries.models import AttemptOutcome, Delivery, Reason
from deliveries.pipeline.claim import (
    Loaded,
)
from deliveries.pipeline.ordering import (
    held_ms,
)
from deliveries.pipeline.outcome import Tried
from deliveries.pipeline.pressure import (
    Admission,
    provider_outcomes,
)
from deliveries.pipeline.sent_marks import SentMarks
from flow.senders import channel_call_begin, channel_call_timed
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
    # The breaker hears of the round's calls at once (one round trip per breaker).
    outcomes = {t.delivery.pk: t.result.outcome for t in tries}
    provider_outcomes(
        outcomes=[(c.admission.breaker, outcomes[c.loaded.delivery.pk]) for c in calls]
    )
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
    call: Call, result: SendResult, reason: str, claimed_at: datetime, duration: int
) -> Tried:
    """The try to record (the breaker hears of the round's calls at its end)."""
    probe_failed = call.admission.probe and result.outcome == AttemptOutcome.TRANSIENT
    return tried(
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
