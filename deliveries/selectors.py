"""Reads over deliveries and devices."""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.db.models import Q

from deliveries.models import Device, DeviceKind

if TYPE_CHECKING:
    from notify.models import Recipient

# What "has a live subscription" means per kind, as a filter the device query carries.
_SUBSCRIBED = {
    DeviceKind.WEBPUSH: ~Q(endpoint="") & ~Q(p256dh="") & ~Q(auth=""),
    DeviceKind.FCM: ~Q(token=""),
}


def push_targets(*, recipient: Recipient, channel: str) -> list[str]:
    """Device ids of the recipient's live subscriptions for a push channel (R-F1).

    The subscription test is part of the same query as the device list, so a device
    with nothing to push to never gets a job, and there is no second look that could
    disagree with the first.
    """
    subscribed = _SUBSCRIBED.get(channel)
    if subscribed is None:
        return []
    ids = (
        Device.objects.filter(subscribed, recipient=recipient, kind=channel, active=True)
        .order_by("pk")
        .values_list("pk", flat=True)
    )
    return [str(pk) for pk in ids]


def device_for_delivery(*, target: str, kind: str) -> Device | None:
    """The device a push delivery targets, read fresh at each attempt (R-D4).

    None when it is gone, deactivated or no longer subscribed.
    """
    if not target.isdigit():
        return None
    return (
        Device.objects.filter(_SUBSCRIBED[kind], pk=int(target), kind=kind, active=True)
        .only("pk", "kind", "endpoint", "p256dh", "auth", "token", "platform")
        .first()
    )
