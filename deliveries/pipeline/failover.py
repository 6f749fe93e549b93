"""Provider failover within a channel: which of a channel's ordered providers
(NOTIFY_EMAIL_PROVIDERS) a delivery goes to, and when it moves on to the next one.

A delivery moves down the list when the provider's breaker is open (the admission finds
it so, and admits it at the next one), when the provider refused it transiently (a 5xx,
a 429, our account's trouble: handed over in the same round), or when the provider's
measured latency would miss the delivery's deadline. A call that ended without an
answer (the connection died after the provider may have taken the message) is handed
over only when the category puts speed before a rare duplicate
(`Category.speed_over_duplicate`); otherwise the delivery stays pinned to that provider
(`Delivery.pinned_provider`) for its later tries. Traffic returns to the primary when
its breaker closes: every admission asks the first provider first.

The latency is measured in this process (a moving average of each provider's calls),
so the choice costs no round trip; a channel without a list costs nothing here at all.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Collection, Mapping, Sequence
from datetime import datetime
from enum import StrEnum

from django.conf import settings
from django.utils import timezone

from deliveries.channels.base import SendResult
from deliveries.models import AttemptOutcome, Delivery
from deliveries.pipeline.pressure import provider_admissions

logger = logging.getLogger(__name__)

# Weight of the newest call in a provider's moving average of call time: a few slow
# calls in a row move it past a login code's deadline, one slow call does not.
LATENCY_WEIGHT = 0.3


class Answer(StrEnum):
    """What a provider's answer says about sending the message elsewhere."""

    DELIVERED = "delivered"  # taken: nothing to do
    PERMANENT = "permanent"  # about the message: no other provider would take it
    TRANSIENT = "transient"  # refused for now, surely not taken: another may take it
    UNKNOWN = "unknown"  # no answer after the request went out: it may have been taken


def answer_kind(result: SendResult) -> Answer:
    """Read a classified result as an `Answer`."""
    if result.outcome == AttemptOutcome.DELIVERED:
        return Answer.DELIVERED
    if result.outcome == AttemptOutcome.PERMANENT:
        return Answer.PERMANENT
    return Answer.UNKNOWN if result.unknown else Answer.TRANSIENT


def channel_providers(channel: str) -> list[str]:
    """The channel's providers in order when it fails over between several; empty when
    it has one (the default: nothing here applies)."""
    providers = settings.NOTIFY_CHANNEL_FAILOVER.get(channel) or []
    return providers if len(providers) > 1 else []


def provider_choose(
    *,
    providers: Sequence[str],
    skip: Collection[str],
    latency: Mapping[str, float],
    deadline_left: float | None,
) -> str | None:
    """The first provider, in order, not in `skip` whose measured latency (seconds)
    leaves the delivery's deadline (`deadline_left` seconds from now, None: none) met;
    when every one left is too slow, the first of them all the same (late may still be
    in time; none is surely not). None when every provider is skipped."""
    left = [p for p in providers if p not in skip]
    if deadline_left is not None:
        for provider in left:
            if latency.get(provider, 0.0) < deadline_left:
                return provider
    return left[0] if left else None


def failover_next(
    *,
    providers: Sequence[str],
    tried: Collection[str],
    answer: Answer,
    speed_over_duplicate: bool,
    latency: Mapping[str, float],
    deadline_left: float | None,
    pinned: bool = False,
) -> str | None:
    """After a provider's answer, the provider to hand the delivery to now, or None to
    keep the answer (retried later by the retry policy). A transient refusal moves on; an
    unknown outcome moves on only when speed matters more than a rare duplicate; a
    delivery or a permanent refusal never does, nor a delivery `pinned` to its provider
    by an earlier unknown outcome (that one may have taken it already). Providers
    already `tried` in this round are not tried again."""
    if answer in (Answer.DELIVERED, Answer.PERMANENT):
        return None
    if (answer is Answer.UNKNOWN or pinned) and not speed_over_duplicate:
        return None
    if deadline_left is not None and deadline_left <= 0:
        return None
    return provider_choose(
        providers=providers, skip=tried, latency=latency, deadline_left=deadline_left
    )


def delivery_providers(*, delivery: Delivery, providers: Sequence[str], now: datetime) -> list[str]:
    """The providers to ask for admission, in order: only its pinned one when an earlier
    call ended unknown (and the category does not put speed first); else the list, the
    ones whose latency meets its deadline first."""
    pinned = delivery.pinned_provider
    if pinned and pinned in providers and not speed_over_duplicate(delivery):
        return [pinned]
    left = deadline_left(delivery=delivery, now=now)
    latency = latencies()
    order: list[str] = []
    while len(order) < len(providers):
        chosen = provider_choose(
            providers=providers, skip=order, latency=latency, deadline_left=left
        )
        if chosen is None:
            break
        order.append(chosen)
    return order


def delivery_pin(*, delivery: Delivery, provider: str, result: SendResult) -> str | None:
    """The provider to pin the delivery to after this final answer of its round: the one
    that may have taken it when the outcome is unknown and the category does not put
    speed first (its later tries must not go elsewhere); None: leave the pin as it is."""
    if answer_kind(result) is Answer.UNKNOWN and not speed_over_duplicate(delivery):
        return provider
    return None


def deadline_left(*, delivery: Delivery, now: datetime) -> float | None:
    """Seconds until the delivery's deadline (None: it has none)."""
    if delivery.deadline is None:
        return None
    return (delivery.deadline - now).total_seconds()


def speed_over_duplicate(delivery: Delivery) -> bool:
    """Whether the delivery's category puts speed before a rare duplicate."""
    return bool(delivery.notification.category.speed_over_duplicate)


def handover_to(*, delivery: Delivery, result: SendResult, tried: Sequence[str]) -> str | None:
    """The provider the delivery goes to now, in the same round, after this answer from
    the last of `tried` (see `failover_next`), admitted there (its breaker and its rate
    limit: a round trip, only on a failover); None: the answer stands."""
    providers = channel_providers(delivery.channel)
    skip = list(tried)
    while True:
        following = failover_next(
            providers=providers,
            tried=skip,
            answer=answer_kind(result),
            speed_over_duplicate=speed_over_duplicate(delivery),
            latency=latencies(),
            deadline_left=deadline_left(delivery=delivery, now=timezone.now()),
            pinned=bool(delivery.pinned_provider),
        )
        if following is None:
            return None
        send = (delivery.channel, delivery.queue, delivery.target)
        admission = provider_admissions(sends=[send], candidates=[[following]])[0]
        if admission.allowed:
            logger.info(
                "delivery %s: %s answered %s %s; handed over to %s", delivery.pk, tried[-1],
                result.status_code, "(unknown)" if result.unknown else "", following,
            )  # fmt: skip
            return following
        skip.append(following)


_lock = threading.Lock()
_latency: dict[str, float] = {}


def provider_latency_note(*, provider: str, seconds: float) -> None:
    """Fold one call's time into the provider's moving average (this process's)."""
    with _lock:
        previous = _latency.get(provider)
        _latency[provider] = (
            seconds if previous is None else previous + LATENCY_WEIGHT * (seconds - previous)
        )


def latencies() -> dict[str, float]:
    """Each provider's measured call time in this process (seconds)."""
    with _lock:
        return dict(_latency)


def latencies_forget() -> None:
    """Forget what was measured (a test starting afresh)."""
    with _lock:
        _latency.clear()
