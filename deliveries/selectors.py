"""Reads over deliveries and devices."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from notify.models import Recipient


def push_targets(*, recipient: Recipient, channel: str) -> list[str]:
    """Device ids of the recipient's live subscriptions for a push channel.

    Push devices are not modelled yet, so no recipient has a push target.
    """
    return []
