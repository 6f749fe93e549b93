"""The gate: the one place that decides, per channel, whether a notification goes out.

`route` calls `decide_deliveries` and creates exactly the deliveries it returns; nothing
else creates deliveries, and each one it creates carries the gate's seal, which the
sender checks. Today it decides by the category's channels, whether the channel is
enabled, whether the recipient has an address there, and then — unless the category
is mandatory — the recipient's opt-outs, marketing consent, quiet hours (marketing is
deferred to the window's end) and the daily marketing cap, in that order.

The clock is an argument (`now`) so the rules can be shown at 03:00 in Tokyo without
waiting for it.
"""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from django.conf import settings
from django.utils import timezone

from deliveries.models import DeliveryStatus, Reason
from notify.models import Channel

if TYPE_CHECKING:
    from notify.models import Notification, Recipient

FEED_TARGET = "feed"


@dataclass(frozen=True)
class ChannelDecision:
    """One delivery to create: where to, and whether it may go out."""

    channel: str
    target: str
    status: str = DeliveryStatus.QUEUED
    reason: str = ""
    not_before: datetime | None = None  # for `deferred`: when it passes the gate again

    @property
    def allowed(self) -> bool:
        return self.status == DeliveryStatus.QUEUED


def channels_for(notification: Notification) -> list[str]:
    """The channels asked for: the producer's list if it gave one, else the defaults."""
    requested = notification.channels or notification.category.default_channels
    known = set(Channel.values)
    return [channel for channel in dict.fromkeys(requested) if channel in known]


def targets_for(channel: str, recipient: Recipient) -> list[str]:
    """Where a channel reaches this recipient: the feed, an address, or device ids."""
    if channel == Channel.INAPP:
        return [FEED_TARGET]
    if channel == Channel.EMAIL:
        return [recipient.email] if recipient.email else []
    if channel == Channel.SMS:
        return [recipient.phone] if recipient.phone else []
    from deliveries.selectors import push_targets

    return push_targets(recipient=recipient, channel=channel)


def decide_deliveries(
    notification: Notification,
    *,
    now: datetime | None = None,
    channels: list[str] | None = None,
) -> list[ChannelDecision]:
    """Every delivery this notification should have, with the gate's verdict on each.

    `channels` narrows the decision to those channels (a fallback after a dead SMS).
    """
    now = now or timezone.now()
    recipient = notification.recipient
    decisions: list[ChannelDecision] = []
    for channel in channels if channels is not None else channels_for(notification):
        if channel not in settings.NOTIFY_CHANNELS_ENABLED:
            decisions.append(
                ChannelDecision(channel, "", DeliveryStatus.SUPPRESSED, Reason.CHANNEL_UNAVAILABLE)
            )
            continue
        targets = targets_for(channel, recipient)
        if not targets:
            decisions.append(
                ChannelDecision(channel, "", DeliveryStatus.SUPPRESSED, Reason.NO_ADDRESS)
            )
            continue
        reason = _declined_by_preferences(notification, channel)
        if reason:
            decisions.extend(
                ChannelDecision(channel, target, DeliveryStatus.SUPPRESSED, reason)
                for target in targets
            )
            continue
        decisions.extend(ChannelDecision(channel, target) for target in targets)
    if notification.category.mandatory or not notification.category.marketing:
        return decisions
    return _marketing_timing(notification, decisions, now)


def _declined_by_preferences(notification: Notification, channel: str) -> str:
    """The reason the recipient's own choices decline this channel, or ""."""
    from preferences.selectors import consent_granted, opt_out_reason, preference_cell

    category = notification.category
    if category.mandatory:
        return ""
    cell = preference_cell(recipient=notification.recipient, category=category, channel=channel)
    if cell is not None and not cell.enabled:
        return opt_out_reason(cell)
    if category.marketing and not consent_granted(
        recipient=notification.recipient, category=category, channel=channel
    ):
        return Reason.NO_CONSENT
    return ""


def _marketing_timing(
    notification: Notification, decisions: list[ChannelDecision], now: datetime
) -> list[ChannelDecision]:
    """Quiet hours defer what would go out; past them, the daily cap may suppress it."""
    from preferences.selectors import quiet_until, recipient_zone
    from preferences.services import marketing_cap_take

    if not any(decision.allowed for decision in decisions):
        return decisions
    recipient = notification.recipient
    until = quiet_until(recipient=recipient, now=now)
    if until is not None:
        return [
            ChannelDecision(d.channel, d.target, DeliveryStatus.DEFERRED, Reason.QUIET_HOURS, until)
            if d.allowed
            else d
            for d in decisions
        ]
    local_date = now.astimezone(recipient_zone(recipient)).date()
    if marketing_cap_take(recipient_id=recipient.pk, local_date=local_date):
        return decisions
    return [
        ChannelDecision(d.channel, d.target, DeliveryStatus.SUPPRESSED, Reason.FREQUENCY_CAP)
        if d.allowed
        else d
        for d in decisions
    ]


def gate_seal(*, notification_id: object, channel: str, target: str) -> str:
    """A keyed hash that only the gate's route step writes and the sender verifies."""
    message = f"{notification_id}|{channel}|{target}".encode()
    return hmac.new(settings.SECRET_KEY.encode(), message, hashlib.sha256).hexdigest()


def gate_seal_valid(*, notification_id: object, channel: str, target: str, seal: str) -> bool:
    expected = gate_seal(notification_id=notification_id, channel=channel, target=target)
    return bool(seal) and hmac.compare_digest(expected, seal)
