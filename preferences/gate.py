"""The gate: the one place that decides, per channel, whether a notification goes out.

`route` calls `decide_deliveries` and creates exactly the deliveries it returns; nothing
else creates deliveries, and each one it creates carries the gate's seal, which the
sender checks. Today it decides by the category's channels, whether the channel is
enabled and whether the recipient has an address there; preferences, consent, quiet
hours and caps plug in here.
"""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass
from typing import TYPE_CHECKING

from django.conf import settings

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


def decide_deliveries(notification: Notification) -> list[ChannelDecision]:
    """Every delivery this notification should have, with the gate's verdict on each."""
    recipient = notification.recipient
    decisions: list[ChannelDecision] = []
    for channel in channels_for(notification):
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
        decisions.extend(ChannelDecision(channel, target) for target in targets)
    return decisions


def gate_seal(*, notification_id: object, channel: str, target: str) -> str:
    """A keyed hash that only the gate's route step writes and the sender verifies."""
    message = f"{notification_id}|{channel}|{target}".encode()
    return hmac.new(settings.SECRET_KEY.encode(), message, hashlib.sha256).hexdigest()


def gate_seal_valid(*, notification_id: object, channel: str, target: str, seal: str) -> bool:
    expected = gate_seal(notification_id=notification_id, channel=channel, target=target)
    return bool(seal) and hmac.compare_digest(expected, seal)
