"""The gate: the one place that decides, per channel, whether a notification goes out.

Routing (in `deliveries`) calls `decide_deliveries` and creates exactly the deliveries
it returns; nothing else creates deliveries, and each one carries the gate's seal, which
the sender checks. The gate decides by the category's channels, whether the channel is
enabled, whether the recipient has an address there, and then — unless the category is
mandatory — the recipient's opt-outs, marketing consent, quiet hours (marketing is
deferred to the window's end) and the daily marketing cap, in that order.

It reads (one query at most, for a whole batch: `gate_inputs_many`), decides and
returns; the only thing it writes is the daily cap's counter (one statement a batch).
Where a channel reaches the recipient (addresses, push devices) is given to it by the
caller, so the gate knows nothing of devices.

The clock is an argument (`now`) so the rules can be shown at 03:00 in Tokyo without
waiting for it.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import date, datetime

from django.conf import settings
from django.db import models
from django.utils import timezone

from notify.models import Category, Channel, Notification, Recipient
from preferences.daily_cap import marketing_caps_take
from preferences.selectors import (
    GateInputs,
    gate_inputs_many,
    marketing_caps_room,
    quiet_until,
    recipient_zone,
)

FEED_TARGET = "feed"
# Prefixed to the key of a test send's seal (`test_send_seal`).
_TEST_SEND = "template-test-send:"


class Verdict(models.TextChoices):
    """What the gate says of one (channel, target); the values are delivery statuses."""

    SEND = "queued", "Send"
    SUPPRESS = "suppressed", "Suppress"
    DEFER = "deferred", "Defer"


class GateReason(models.TextChoices):
    """Why the gate held a delivery back; support reads these in plain words."""

    OPTED_OUT = "opted_out", "The recipient opted out of this category on this channel"
    UNSUBSCRIBED = "unsubscribed", "The recipient unsubscribed"
    NO_CONSENT = "no_consent", "No recorded marketing consent"
    QUIET_HOURS = "quiet_hours", "Inside the recipient's quiet hours"
    FREQUENCY_CAP = "frequency_cap", "Daily marketing cap reached"
    NO_ADDRESS = "no_address", "The recipient has no address for this channel"
    CHANNEL_UNAVAILABLE = "channel_unavailable", "This channel is not enabled on the platform"
    ERASURE_HOLD = (
        "erasure_hold",
        "This user id or address was erased on request; nothing is sent before fresh consent",
    )


@dataclass(frozen=True)
class ChannelDecision:
    """One delivery to create: where to, and whether it may go out."""

    channel: str
    target: str
    status: str = Verdict.SEND
    reason: str = ""
    not_before: datetime | None = None  # for `deferred`: when it passes the gate again

    @property
    def allowed(self) -> bool:
        return self.status == Verdict.SEND


def channels_for(notification: Notification) -> list[str]:
    """The channels asked for: the producer's list if it gave one, else the defaults."""
    requested = notification.channels or notification.category.default_channels
    known = set(Channel.values)
    return [channel for channel in dict.fromkeys(requested) if channel in known]


def address_targets(channel: str, recipient: Recipient) -> list[str]:
    """Where a non-push channel reaches this recipient: the feed, an email or a phone."""
    if channel == Channel.INAPP:
        return [FEED_TARGET]
    if channel == Channel.EMAIL:
        return [recipient.email] if recipient.email else []
    if channel == Channel.SMS:
        return [recipient.phone] if recipient.phone else []
    return []


@dataclass(frozen=True)
class GateRequest:
    """One notification to decide: the channels asked for, and for each push channel
    the recipient's live device ids (the caller reads them with the device list)."""

    notification: Notification
    channels: list[str]
    push_targets: Mapping[str, list[str]]
    # Channels whose delivery the daily cap does not count here: a digest's events are
    # counted once, when their window closes (the close asks the gate again).
    uncapped: frozenset[str] = frozenset()
    # The moment to decide for, when not the batch's `now`: a campaign's estimate asks
    # for each member at the time they are due.
    at: datetime | None = None


def decide_deliveries(
    notification: Notification,
    *,
    channels: list[str],
    push_targets: Mapping[str, list[str]],
    now: datetime | None = None,
) -> list[ChannelDecision]:
    """Every delivery this notification should have on `channels`, with the verdict on each.

    `push_targets` maps a push channel to the recipient's live device ids (the caller
    reads them in the same query as the device list).
    """
    request = GateRequest(notification, channels, push_targets)
    return decide_deliveries_many([request], now=now)[0]


def decide_deliveries_many(
    requests: Sequence[GateRequest], *, now: datetime | None = None, dry_run: bool = False
) -> list[list[ChannelDecision]]:
    """`decide_deliveries` for a batch, one list of decisions per request, in order.

    Each notification is decided by its own recipient's choices, exactly as alone; the
    batch only shares the reads (one statement for every recipient's preferences,
    consent and quiet hours) and the daily cap's counting (one statement). `dry_run`:
    the cap is read, not counted, so the gate writes nothing (a campaign's estimate).
    """
    now = now or timezone.now()
    inputs = gate_inputs_many(
        pairs=[
            (r.notification.recipient, r.notification.category)
            for r in requests
            if r.notification.recipient.erasure_hold_since is None
        ]
    )
    answers: list[list[ChannelDecision]] = []
    capped: list[tuple[int, tuple[int, date]]] = []  # (answer index, (recipient, day))
    for request in requests:
        recipient = request.notification.recipient
        if recipient.erasure_hold_since is not None:
            # Registered again after an erasure: not even mandatory categories go out
            # before the person consents afresh (docs/erasure.md).
            answers.append(
                [
                    ChannelDecision(channel, "", Verdict.SUPPRESS, GateReason.ERASURE_HOLD)
                    for channel in request.channels
                ]
            )
            continue
        category = request.notification.category
        pair_inputs = inputs[(recipient.pk, category.pk)]
        decisions = _decided_by_choices(request, pair_inputs)
        if category.mandatory or not category.marketing:
            answers.append(decisions)
            continue
        decisions, cap_day = _marketing_timing(
            recipient, decisions, pair_inputs, request.at or now, uncapped=request.uncapped
        )
        if cap_day is not None:
            capped.append((len(answers), (recipient.pk, cap_day)))
        answers.append(decisions)
    count = marketing_caps_room if dry_run else marketing_caps_take
    granted = count(requests=[day for _, day in capped])
    for (index, _), allowed in zip(capped, granted, strict=True):
        if not allowed:
            answers[index] = [
                ChannelDecision(d.channel, d.target, Verdict.SUPPRESS, GateReason.FREQUENCY_CAP)
                if d.allowed
                else d
                for d in answers[index]
            ]
    return answers


def _decided_by_choices(request: GateRequest, inputs: GateInputs) -> list[ChannelDecision]:
    """The verdicts by channel availability, address, opt-outs and consent."""
    notification = request.notification
    recipient, category = notification.recipient, notification.category
    decisions: list[ChannelDecision] = []
    for channel in request.channels:
        if channel not in settings.NOTIFY_CHANNELS_ENABLED:
            decisions.append(
                ChannelDecision(channel, "", Verdict.SUPPRESS, GateReason.CHANNEL_UNAVAILABLE)
            )
            continue
        targets = request.push_targets.get(channel) or address_targets(channel, recipient)
        if not targets:
            decisions.append(ChannelDecision(channel, "", Verdict.SUPPRESS, GateReason.NO_ADDRESS))
            continue
        reason = _declined_by_preferences(category, channel, inputs)
        verdict = Verdict.SUPPRESS if reason else Verdict.SEND
        decisions.extend(ChannelDecision(channel, t, verdict, reason) for t in targets)
    return decisions


def _declined_by_preferences(category: Category, channel: str, inputs: GateInputs) -> str:
    """The reason the recipient's own choices decline this channel, or ""."""
    if category.mandatory:
        return ""
    cell = inputs.cells.get(channel)
    if cell is not None and not cell.enabled:
        return GateReason.UNSUBSCRIBED if cell.from_email_link else GateReason.OPTED_OUT
    if category.marketing and not inputs.consent_granted(category_id=category.pk, channel=channel):
        return GateReason.NO_CONSENT
    return ""


def _marketing_timing(
    recipient: Recipient,
    decisions: list[ChannelDecision],
    inputs: GateInputs,
    now: datetime,
    *,
    uncapped: frozenset[str] = frozenset(),
) -> tuple[list[ChannelDecision], date | None]:
    """Quiet hours defer what would go out; past them, the daily cap decides. Returns the
    decisions and the recipient's local day to count against the cap (None: nothing to
    count); the caller counts it and suppresses what the cap refuses. Only `uncapped`
    channels allowed: nothing is counted (they are counted later, once)."""
    if not any(decision.allowed for decision in decisions):
        return decisions, None
    until = quiet_until(recipient=recipient, now=now, window=inputs.quiet_window)
    if until is not None:
        deferred = [
            ChannelDecision(d.channel, d.target, Verdict.DEFER, GateReason.QUIET_HOURS, until)
            if d.allowed
            else d
            for d in decisions
        ]
        return deferred, None
    if all(d.channel in uncapped for d in decisions if d.allowed):
        return decisions, None
    return decisions, now.astimezone(recipient_zone(recipient)).date()


@functools.lru_cache(maxsize=16)
def _sealer(key: str) -> hmac.HMAC:
    """The HMAC of a key before any message: set up once per key, copied per seal (the
    sender checks a seal per delivery; the copy gives the same digest for less)."""
    return hmac.new(key.encode(), digestmod=hashlib.sha256)


def _seal_with(key: str, *, notification_id: object, channel: str, target: str) -> str:
    mac = _sealer(key).copy()  # the prepared one is never updated
    mac.update(f"{notification_id}|{channel}|{target}".encode())
    return mac.hexdigest()


def gate_seal(*, notification_id: object, channel: str, target: str) -> str:
    """A keyed hash that only the gate's route step writes and the sender verifies."""
    return _seal_with(
        settings.SECRET_KEY, notification_id=notification_id, channel=channel, target=target
    )


def test_send_seal(*, notification_id: object, channel: str, target: str) -> str:
    """The seal of a staff member's "Send test to me" delivery, the one kind that skips
    the gate (preferences, quiet hours, the daily cap). Made with a key of its own, so
    a test seal is never a gate's seal and the test marker cannot be forged either."""
    return _seal_with(
        _TEST_SEND + settings.SECRET_KEY,
        notification_id=notification_id,
        channel=channel,
        target=target,
    )


def test_send_sealed(*, notification_id: object, channel: str, target: str, seal: str) -> bool:
    """True when `seal` is a test send's (`test_send_seal`, with SECRET_KEY or one of
    SECRET_KEY_FALLBACKS): what a channel reads to mark what it sends as a test."""
    if not seal:
        return False
    keys = [settings.SECRET_KEY, *getattr(settings, "SECRET_KEY_FALLBACKS", ())]
    return any(
        hmac.compare_digest(
            _seal_with(
                _TEST_SEND + key, notification_id=notification_id, channel=channel, target=target
            ),
            seal,
        )
        for key in keys
    )


def gate_seal_valid(*, notification_id: object, channel: str, target: str, seal: str) -> bool:
    """True when `seal` was made by the gate (or, for a test send, by `test_send_seal`)
    with SECRET_KEY or one of SECRET_KEY_FALLBACKS.

    Deliveries sealed before a key rotation stay sendable while the old key is a fallback.
    """
    if not seal:
        return False
    keys = [settings.SECRET_KEY, *getattr(settings, "SECRET_KEY_FALLBACKS", ())]
    return any(
        hmac.compare_digest(
            _seal_with(key, notification_id=notification_id, channel=channel, target=target),
            seal,
        )
        for key in [*keys, *(_TEST_SEND + key for key in keys)]
    )
