"""Reads of preferences, consent and quiet hours: what the gate and the API look at."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, time, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from django.conf import settings
from django.db.models import Q

from notify.models import Category, Channel, Recipient
from preferences.models import ConsentRecord, ConsentSource, Preference, QuietHours


def preference_cell(*, recipient: Recipient, category: Category, channel: str) -> Preference | None:
    """The recipient's own setting for this cell, or None when the default applies."""
    return Preference.objects.filter(
        recipient=recipient, category=category, channel=channel
    ).first()


def consent_granted(*, recipient: Recipient, category: Category, channel: str) -> bool:
    """Marketing consent as of the latest record that covers this category and channel."""
    latest = (
        ConsentRecord.objects.filter(recipient=recipient)
        .filter(Q(category=category) | Q(category__isnull=True))
        .filter(Q(channel=channel) | Q(channel=""))
        .order_by("-id")
        .first()
    )
    return latest is not None and latest.granted


def consent_history(*, recipient: Recipient) -> list[ConsentRecord]:
    """Every consent record of the recipient, oldest first."""
    return list(ConsentRecord.objects.filter(recipient=recipient).order_by("id"))


def category_channels(category: Category, cells: dict[str, bool]) -> list[str]:
    """Channels shown for a category: its defaults plus any the recipient set."""
    known = [c for c in category.default_channels if c in Channel.values]
    return list(dict.fromkeys([*known, *cells]))


def preferences_document(*, recipient: Recipient) -> dict:
    """The GET /v1/users/{id}/preferences body: effective value per cell.

    A mandatory cell is always true; a marketing cell is true only with consent.
    """
    stored: dict[str, dict[str, Preference]] = {}
    for pref in Preference.objects.filter(recipient=recipient).select_related("category"):
        stored.setdefault(pref.category.key, {})[pref.channel] = pref
    categories: dict[str, dict[str, bool]] = {}
    mandatory: list[str] = []
    for category in Category.objects.order_by("key"):
        cells = stored.get(category.key, {})
        values: dict[str, bool] = {}
        for channel in category_channels(category, {c: True for c in cells}):
            if category.mandatory:
                values[channel] = True
                continue
            pref = cells.get(channel)
            enabled = pref.enabled if pref is not None else True
            if enabled and category.marketing:
                enabled = consent_granted(recipient=recipient, category=category, channel=channel)
            values[channel] = enabled
        categories[category.key] = values
        if category.mandatory:
            mandatory.append(category.key)
    window = quiet_window(recipient=recipient)
    return {
        "categories": categories,
        "mandatory": mandatory,
        "quiet_hours": {"start": f"{window.start:%H:%M}", "end": f"{window.end:%H:%M}"},
    }


def opt_out_reason(pref: Preference | None) -> str:
    """`unsubscribed` when the cell was turned off from an email link, else `opted_out`."""
    if pref is not None and pref.source == ConsentSource.EMAIL_LINK:
        return "unsubscribed"
    return "opted_out"


# --- Quiet hours ------------------------------------------------------------------------


@dataclass(frozen=True)
class QuietWindow:
    start: time
    end: time


def _parse_hhmm(value: str) -> time:
    hours, minutes = value.split(":")
    return time(int(hours), int(minutes))


def quiet_window(*, recipient: Recipient) -> QuietWindow:
    own = QuietHours.objects.filter(recipient=recipient).first()
    if own is not None:
        return QuietWindow(own.start, own.end)
    return QuietWindow(
        _parse_hhmm(settings.NOTIFY_QUIET_HOURS_START), _parse_hhmm(settings.NOTIFY_QUIET_HOURS_END)
    )


def recipient_zone(recipient: Recipient) -> ZoneInfo:
    try:
        return ZoneInfo(recipient.timezone or "UTC")
    except (ZoneInfoNotFoundError, ValueError):
        return ZoneInfo("UTC")


def quiet_until(*, recipient: Recipient, now: datetime) -> datetime | None:
    """When the recipient's quiet window ends, if `now` is inside it; else None.

    The window is local wall-clock time and may cross midnight (21:00-09:00).
    """
    window = quiet_window(recipient=recipient)
    if window.start == window.end:
        return None
    local = now.astimezone(recipient_zone(recipient))
    clock = local.time().replace(tzinfo=None)
    if window.start < window.end:
        inside = window.start <= clock < window.end
    else:
        inside = clock >= window.start or clock < window.end
    if not inside:
        return None
    end_day = local.date()
    if clock >= window.end:  # inside after the start: the window ends tomorrow
        end_day += timedelta(days=1)
    return datetime.combine(end_day, window.end, tzinfo=local.tzinfo)
