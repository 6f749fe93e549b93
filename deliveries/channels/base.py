"""What every channel provider returns, and what the providers share: reading an answer
(Retry-After, a refusal, a failed call, a device proven gone). The bounded HTTP session
they post through is egress/sessions.py."""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC
from email.utils import parsedate_to_datetime
from typing import TYPE_CHECKING, Any, Protocol

import requests
from django.conf import settings
from django.utils import timezone
from urllib3.exceptions import ConnectTimeoutError, NewConnectionError

from deliveries.models import AttemptOutcome, DeviceKind

if TYPE_CHECKING:
    from deliveries.models import Delivery
    from templates_admin.models import TemplateVersion

# The provider answers that prove a device's subscription or token is gone for good.
# Anything not listed here — e.g. FCM's generic INVALID_ARGUMENT, which is about the
# message — never deactivates a device.
PERMANENT_DEVICE_CODES: dict[str, frozenset[str]] = {
    # 404/410: unsubscribed; 401/403: the subscription is bound to another VAPID key.
    DeviceKind.WEBPUSH: frozenset({"401", "403", "404", "410"}),
    DeviceKind.FCM: frozenset({"UNREGISTERED", "SENDER_ID_MISMATCH"}),
}


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
    # A permanent failure that proves the push device (the delivery's target) gone
    # (PERMANENT_DEVICE_CODES): the outcome step deactivates it.
    device_gone: bool = False
    # A transient failure after the request went out with no answer back (a timeout, a
    # connection lost mid-call): the provider may have taken the message. Another
    # provider is tried then only for a category that puts speed first.
    unknown: bool = False

    @classmethod
    def delivered(cls, *, provider_message_id: str = "", status_code: str = "", response: str = ""):
        return cls(AttemptOutcome.DELIVERED, status_code, response, provider_message_id)

    @classmethod
    def transient(
        cls, *, status_code: str = "", response: str = "", retry_after=None, give_up=False,
        unknown=False,
    ):  # fmt: skip
        return cls(
            AttemptOutcome.TRANSIENT, status_code, response, retry_after=retry_after,
            give_up=give_up, unknown=unknown,
        )  # fmt: skip

    @classmethod
    def permanent(
        cls, *, status_code: str = "", response: str = "", hard_bounce=False, device_gone=False
    ):
        return cls(
            AttemptOutcome.PERMANENT, status_code, response, hard_bounce=hard_bounce,
            device_gone=device_gone,
        )  # fmt: skip

    def noted(self, note: str) -> SendResult:
        """The same result, its response followed by `note`; every other field is kept
        (give_up above all: an SMS part throttled out stays dead)."""
        return dataclasses.replace(self, response=f"{self.response} ({note})")


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


def refusal(
    *, kind: str, code: str, text: str, permanent: bool, headers: Mapping[str, str] | None
) -> SendResult:
    """A push provider's refusal: permanent when its code proves the device gone (which
    says so) or when `permanent`; else transient, with the provider's Retry-After."""
    if code in PERMANENT_DEVICE_CODES[kind]:
        return SendResult.permanent(status_code=code, response=text, device_gone=True)
    if permanent:
        return SendResult.permanent(status_code=code, response=text)
    retry_after = parse_retry_after(headers.get("Retry-After")) if headers is not None else None
    return SendResult.transient(status_code=code, response=text, retry_after=retry_after)


def call_failed(error: Exception) -> SendResult:
    """A call that got no answer (timeout, network, the call's deadline): transient, and
    unknown unless it never reached the provider (no connection was made)."""
    code = "timeout" if isinstance(error, requests.Timeout) else type(error).__name__
    return SendResult.transient(
        status_code=code, response=str(error)[:500], unknown=not never_connected(error)
    )


def never_connected(error: BaseException) -> bool:
    """Whether a failed call never got a connection to the provider (refused, a connect
    timeout, no such host): the request cannot have been taken."""
    seen: BaseException | None = error
    while seen is not None:
        if isinstance(seen, NewConnectionError | ConnectTimeoutError | ConnectionRefusedError):
            return True
        if isinstance(seen, requests.ConnectTimeout):
            return True
        seen = seen.__cause__ or seen.__context__ or _reason(seen)
    return False


def _reason(error: BaseException) -> BaseException | None:
    """urllib3's MaxRetryError keeps its cause in `reason`, and requests' errors their
    urllib3 error in `args[0]`."""
    reason = getattr(error, "reason", None)
    if isinstance(reason, BaseException):
        return reason
    first = error.args[0] if error.args else None
    return first if isinstance(first, BaseException) and first is not error else None


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
