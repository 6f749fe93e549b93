"""The gate: the one place that decides, per channel, whether a notification goes out.

`route` calls `decide_deliveries` and creates exactly the deliveries it returns; nothing
else creates deliveries. Today it decides by the category's channels and whether the
recipient has an address there; preferences, consent, quiet hours and caps plug in here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from django.conf import settings

from deliveries.models import DeliveryStatus, Reason
from notify.models import Channel

if TYPE_CHECKING:
    from notify.models import Notification

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


def decide_deliveries(notification: Notification) -> list[ChannelDecision]:
    """Every delivery this notification should have, with the gate's verdict on each."""
    recipient = notification.recipient
    decisions: list[ChannelDecision] = []
    for channel in channels_for(notification):
        target = _address(channel, recipient)
        if channel not in settings.NOTIFY_CHANNELS_ENABLED:
            decisions.append(
                ChannelDecision(
                    channel, target, DeliveryStatus.SUPPRESSED, Reason.CHANNEL_UNAVAILABLE
                )
            )
        elif target:
            decisions.append(ChannelDecision(channel, target))
        else:
            decisions.append(
                ChannelDecision(channel, "", DeliveryStatus.SUPPRESSED, Reason.NO_ADDRESS)
            )
    return decisions


def _address(channel: str, recipient) -> str:
    if channel == Channel.INAPP:
        return FEED_TARGET
    if channel == Channel.EMAIL:
        return recipient.email
    if channel == Channel.SMS:
        return recipient.phone
    return ""  # push channels: devices arrive with the push work
