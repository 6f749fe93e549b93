"""Channel providers: one module each, loaded lazily by kind (SDKs stay out of start-up)."""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from deliveries.channels.base import ChannelProvider

_MODULES = {
    "inapp": "deliveries.channels.inapp",
    "email": "deliveries.channels.email",
    "webpush": "deliveries.channels.webpush",
    "fcm": "deliveries.channels.fcm",
    "sms": "deliveries.channels.sms.channel",
}


def provider_for(channel: str) -> ChannelProvider:
    """The provider module for a channel; a channel without one is a programming error."""
    try:
        path = _MODULES[channel]
    except KeyError:
        raise LookupError(f"no provider for channel {channel!r}") from None
    return import_module(path)  # type: ignore[return-value]
