"""How long a delivery stays worth sending on each channel.

One rule, read by routing (a delivery's deadline) and by the category admin (which says
what applies): the notification's own TTL when the producer gave one; else the shorter
of the category's TTL and the channel's default deadline. A category's TTL can make a
channel give up sooner, never later: three days for a promo must not keep a push alive
for days, nor an email past the day email allows.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.conf import settings


@dataclass(frozen=True)
class ChannelDeadline:
    """One channel's deadline for a category, and which of the two limits set it."""

    channel: str
    seconds: int
    from_category: bool


def channel_deadline(*, channel: str, category_ttl: int | None) -> ChannelDeadline:
    """The shorter of the category's TTL (if any) and the channel's default deadline."""
    default = settings.NOTIFY_CHANNEL_DEADLINE_SECONDS[channel]
    if category_ttl and category_ttl < default:
        return ChannelDeadline(channel, category_ttl, from_category=True)
    return ChannelDeadline(channel, default, from_category=False)


def deadline_seconds(
    *, channel: str, notification_ttl: int | None, category_ttl: int | None
) -> int:
    """Seconds a delivery on `channel` stays worth sending (see the module's rule)."""
    if notification_ttl:
        return notification_ttl
    return channel_deadline(channel=channel, category_ttl=category_ttl).seconds


def category_deadlines(*, category_ttl: int | None) -> list[ChannelDeadline]:
    """Every channel's deadline for a category with this TTL, in settings order."""
    return [
        channel_deadline(channel=channel, category_ttl=category_ttl)
        for channel in settings.NOTIFY_CHANNEL_DEADLINE_SECONDS
    ]


def duration_text(seconds: int) -> str:
    """A duration as a person reads it: `10 min`, `1 h`, `24 h`, `3 d`, else seconds."""
    # Days only from two on: "24 h" is how email's deadline is spoken of.
    for unit, size, least in (("d", 86400, 2 * 86400), ("h", 3600, 3600), ("min", 60, 60)):
        if seconds >= least and seconds % size == 0:
            return f"{seconds // size} {unit}"
    return f"{seconds} s"
