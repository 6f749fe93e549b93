""" "Send test to me": each channel's way of sending a template version to the staff member
who asks, from the preview page.

Email is sent here, through the real email backend, to the staff account's address. The
other channels need a recipient and the delivery pipeline, which live in `deliveries`, a
layer above this one: `deliveries` registers their senders when the admin loads
(`send_test_register`, from deliveries/admin.py), so this module never imports it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.core.mail import get_connection

from notify.models import Channel
from templates_admin.mail import VersionEmailMessage
from templates_admin.models import TemplateVersion
from templates_admin.rendering import build_context


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


def _email(request: SendTestRequest) -> str:
    """The version through the real email backend, to the staff account's own address."""
    address = getattr(request.user, "email", "")
    if not address:
        raise SendTestRefused("Your staff account has no email address; add one first.")
    context = build_context(
        request.payload,
        recipient={
            "user_id": request.user.get_username(),
            "locale": request.locale,
            "timezone": settings.NOTIFY_DEFAULT_TIMEZONE,
        },
    )
    message = VersionEmailMessage(
        version=request.version,
        context=context,
        locale=request.locale,
        connection=get_connection(fail_silently=False),
    )
    try:
        message.send(to=[address])
    except Exception as error:  # the relay's answer is what the marketer needs to see
        raise SendTestRefused(f"The test email was not sent: {error}") from error
    return f"Test email sent to {address}."


send_test_register(Channel.EMAIL, _email)
