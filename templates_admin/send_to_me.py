""" "Send test to me": each channel's way of sending a template version to the staff member
who asks, from the preview page.

An email test goes to the staff account's own address, needing no recipient, and is
recorded nowhere; the other channels' tests go to the staff member's linked recipient
through the delivery pipeline (deliveries/support/send_to_me.py says how and why). Both
live in `deliveries`, a layer above this one: `deliveries` registers the senders when the
admin loads (`send_test_register`, from deliveries/admin.py), so this module never
imports it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.contrib.auth.models import AbstractBaseUser

from templates_admin.models import TemplateVersion


@dataclass(frozen=True)
class SendTestRequest:
    """What a staff member asked for: this version, rendered with this payload and locale."""

    version: TemplateVersion
    payload: dict[str, Any]
    locale: str
    user: AbstractBaseUser


class SendTestRefused(Exception):
    """Nothing was sent; the message says why, in words the staff member can act on."""


# channel → sender; the sender returns what was sent, in words, or raises SendTestRefused.
SendTestSender = Callable[[SendTestRequest], str]
_SENDERS: dict[str, SendTestSender] = {}


def send_test_register(channel: str, sender: SendTestSender) -> None:
    """Make `sender` the "Send test to me" of `channel` (called once, as the admin loads)."""
    _SENDERS[channel] = sender


def template_version_send_test(request: SendTestRequest) -> str:
    """Send the version to the staff member on its template's channel; returns what was
    sent, or raises SendTestRefused (no sender for the channel, no address, ...)."""
    channel = request.version.template.channel
    sender = _SENDERS.get(channel)
    if sender is None:
        raise SendTestRefused(f"Test sends are not available for {channel} templates.")
    return sender(request)
