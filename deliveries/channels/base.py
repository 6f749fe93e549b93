"""What every channel provider returns, so callers never guess shapes."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from datetime import UTC
from email.utils import parsedate_to_datetime
from typing import TYPE_CHECKING, Any, Protocol

from django.conf import settings
from django.utils import timezone

from deliveries.models import AttemptOutcome

if TYPE_CHECKING:
    from deliveries.models import Delivery
    from templates_admin.models import TemplateVersion


@dataclass(frozen=True)
class SendResult:
    """The classified answer of one provider call."""

    outcome: AttemptOutcome
    status_code: str = ""
    response: str = ""
    provider_message_id: str = ""
    # Seconds the provider asked us to wait (Retry-After), when it said so.
    retry_after: float | None = None
    # A transient failure that already spent the channel's own retries (SMPP 0x58 after
    # its in-send pauses): the delivery ends dead instead of being retried.
    give_up: bool = False
    # A permanent failure that says the address itself is dead (SMTP 5xx on the recipient,
    # SMPP invalid or barred destination): it is suppressed for this channel.
    hard_bounce: bool = False

    @classmethod
    def delivered(cls, *, provider_message_id: str = "", status_code: str = "", response: str = ""):
        return cls(AttemptOutcome.DELIVERED, status_code, response, provider_message_id)

    @classmethod
    def transient(
        cls, *, status_code: str = "", response: str = "", retry_after=None, give_up=False
    ):
        return cls(
            AttemptOutcome.TRANSIENT, status_code, response, retry_after=retry_after,
            give_up=give_up,
        )  # fmt: skip

    @classmethod
    def permanent(cls, *, status_code: str = "", response: str = "", hard_bounce: bool = False):
        return cls(AttemptOutcome.PERMANENT, status_code, response, hard_bounce=hard_bounce)


class ChannelProvider(Protocol):
    """A channel module: builds the provider request, calls it, classifies the answer."""

    def send(
        self, delivery: Delivery, version: TemplateVersion, context: dict[str, Any]
    ) -> SendResult: ...


def ttl_left(delivery: Delivery) -> int:
    """Seconds left of the notification's TTL: how long a push service may hold it."""
    if delivery.deadline is None:
        return settings.NOTIFY_PUSH_DEADLINE_SECONDS
    return max(0, int((delivery.deadline - timezone.now()).total_seconds()))


_DELAY_SECONDS = re.compile(r"[0-9]+")


def parse_retry_after(value: str | None) -> float | None:
    """Retry-After as seconds (it may be seconds or an HTTP date); None when absent/bad.

    At most NOTIFY_PUSH_RETRY_AFTER_MAX: a provider's huge value must not overflow the
    date arithmetic of the retry (a push asked to wait past its deadline expires).
    """
    if not value:
        return None
    value = value.strip()
    ceiling = settings.NOTIFY_PUSH_RETRY_AFTER_MAX
    if _DELAY_SECONDS.fullmatch(value):
        seconds = float(value)  # inf past ~308 digits: bounded below
    else:
        try:
            when = parsedate_to_datetime(value)
            if when.tzinfo is None:  # "-0000": UTC by RFC 5322
                when = when.replace(tzinfo=UTC)
            seconds = (when - timezone.now()).total_seconds()
        except (TypeError, ValueError, OverflowError, IndexError):
            return None
    if not math.isfinite(seconds):
        return ceiling
    return min(max(0.0, seconds), ceiling)
