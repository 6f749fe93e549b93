"""Reads of preferences, consent and quiet hours: what the gate and the API look at."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import date, datetime, time, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from django.conf import settings
from django.db import connection
from django.db.models import Q

from notify.category_labels import category_text
from notify.models import Category, Channel, Recipient
from pgarrays import array_literal, planned_once
from preferences.languages import person_language
from preferences.models import (
    ConsentRecord,
    ConsentSource,
    MarketingDayCount,
    Preference,
    QuietHours,
)


@dataclass(frozen=True)
class Cell:
    """The recipient's own setting of one (category, channel) cell."""

    enabled: bool
    from_email_link: bool  # turned off from an unsubscribe link: shown as `unsubscribed`


@dataclass(frozen=True)
class Consent:
    category_id: int | None  # None: all marketing
    channel: str  # "": every channel
    granted: bool


@dataclass(frozen=True)
class GateInputs:
    """Everything the gate reads about one recipient and category, read at once."""

    cells: dict[str, Cell] = field(default_factory=dict)
    consents: list[Consent] = field(default_factory=list)  # newest first
    quiet_window: QuietWindow | None = None

    def consent_granted(self, *, category_id: int, channel: str) -> bool:
        """Marketing consent as of the newest record that covers this category and channel."""
        for consent in self.consents:
            if consent.category_id in (None, category_id) and consent.channel in ("", channel):
                return consent.granted
        return False


def gate_inputs(*, recipient: Recipient, category: Category) -> GateInputs:
    """The recipient's cells for `category` and, for marketing, their consent history and
    quiet window — in one round trip. A mandatory category reads nothing.
    """
    return gate_inputs_many(pairs=[(recipient, category)])[(recipient.pk, category.pk)]


# The gate's reads for many (recipient, category) pairs in one statement; a pair's reads
# are index lookups on the recipient.
_GATE_INPUTS_SQL = planned_once(
    f"""
    SELECT v.r, v.c,
      (SELECT coalesce(json_agg(json_build_array(channel, enabled, source)), '[]')
         FROM {Preference._meta.db_table}
        WHERE recipient_id = v.r AND category_id = v.c),
      (SELECT coalesce(json_agg(json_build_array(category_id, channel, granted)
                                ORDER BY id DESC), '[]')
         FROM {ConsentRecord._meta.db_table}
        WHERE v.m AND recipient_id = v.r AND (category_id = v.c OR category_id IS NULL)),
      (SELECT json_build_array(start, "end")
         FROM {QuietHours._meta.db_table}
        WHERE v.m AND recipient_id = v.r)
      FROM unnest(%(r)s::bigint[], %(c)s::bigint[], %(m)s::boolean[]) AS v(r, c, m)
"""
)


def gate_inputs_many(
    *, pairs: list[tuple[Recipient, Category]]
) -> dict[tuple[int, int], GateInputs]:
    """`gate_inputs` for many (recipient, category) pairs, keyed by their ids, in one
    round trip (none when every category is mandatory: those read nothing)."""
    wanted = {(r.pk, c.pk): c.marketing for r, c in pairs if not c.mandatory}
    found: dict[tuple[int, int], GateInputs] = {
        (r.pk, c.pk): GateInputs() for r, c in pairs if c.mandatory
    }
    if not wanted:
        return found
    keys = list(wanted)
    with connection.cursor() as cursor:
        cursor.execute(
            _GATE_INPUTS_SQL,
            {
                "r": array_literal(r for r, _ in keys),
                "c": array_literal(c for _, c in keys),
                "m": array_literal(wanted[key] for key in keys),
            },
        )
        for recipient_id, category_id, cells, consents, quiet in cursor.fetchall():
            marketing = wanted[(recipient_id, category_id)]
            found[(recipient_id, category_id)] = _gate_inputs_built(
                cells, consents, quiet, marketing=marketing
            )
    return found


def _gate_inputs_built(
    cells: object, consents: object, quiet: object, *, marketing: bool
) -> GateInputs:
    """GateInputs from the three JSON columns of the gate's reads."""
    return GateInputs(
        cells={
            channel: Cell(enabled, source == ConsentSource.EMAIL_LINK)
            for channel, enabled, source in _json(cells)
        },
        consents=[Consent(c, ch, granted) for c, ch, granted in _json(consents)],
        quiet_window=(
            # As stored (to the second), as `quiet_window` reads it one by one.
            QuietWindow(time.fromisoformat(quiet[0]), time.fromisoformat(quiet[1]))
            if quiet
            else default_quiet_window()
        )
        if marketing
        else None,
    )


def _json(value: object) -> list:
    # psycopg decodes json columns; a driver that hands back text is handled too.
    return json.loads(value) if isinstance(value, str) else list(value or [])


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
    """The GET /v1/users/{id}/preferences body: effective value per cell, each category's
    label and description in the person's language, quiet hours, time zone, language and
    the languages on offer.

    A mandatory cell is always true; a marketing cell is true only with consent.
    """
    stored: dict[str, dict[str, Preference]] = {}
    for pref in Preference.objects.filter(recipient=recipient).select_related("category"):
        stored.setdefault(pref.category.key, {})[pref.channel] = pref
    categories: dict[str, dict[str, bool]] = {}
    labels: dict[str, dict[str, str]] = {}
    mandatory: list[str] = []
    language = person_language(recipient.locale)
    for category in Category.objects.order_by("key"):
        text = category_text(category, language=language)
        labels[category.key] = {"label": text.label, "description": text.description}
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
        "labels": labels,
        "quiet_hours": {"start": f"{window.start:%H:%M}", "end": f"{window.end:%H:%M}"},
        "timezone": recipient.timezone or "UTC",
        "locale": recipient.locale,
        "languages": offered_languages(current=recipient.locale),
    }


def offered_languages(*, current: str) -> list[str]:
    """The language choices a person is offered (preference center, inbox): the
    configured ones, plus the person's own."""
    languages = list(settings.NOTIFY_PREFERENCE_CENTER_LANGUAGES)
    if current and current not in languages:
        languages.append(current)
    return languages


# --- Quiet hours ------------------------------------------------------------------------


@dataclass(frozen=True)
class QuietWindow:
    start: time
    end: time


def _parse_hhmm(value: str) -> time:
    hours, minutes = value.split(":")
    return time(int(hours), int(minutes))


def default_quiet_window() -> QuietWindow:
    return QuietWindow(
        _parse_hhmm(settings.NOTIFY_QUIET_HOURS_START), _parse_hhmm(settings.NOTIFY_QUIET_HOURS_END)
    )


def quiet_window(*, recipient: Recipient) -> QuietWindow:
    own = QuietHours.objects.filter(recipient=recipient).first()
    if own is not None:
        return QuietWindow(own.start, own.end)
    return default_quiet_window()


def recipient_zone(recipient: Recipient) -> ZoneInfo:
    try:
        return ZoneInfo(recipient.timezone or "UTC")
    except (ZoneInfoNotFoundError, ValueError):
        return ZoneInfo("UTC")


def quiet_until(
    *, recipient: Recipient, now: datetime, window: QuietWindow | None = None
) -> datetime | None:
    """When the recipient's quiet window ends, if `now` is inside it; else None.

    The window is local wall-clock time and may cross midnight (21:00-09:00); it is
    read from the database unless the caller already has it.
    """
    window = window or quiet_window(recipient=recipient)
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


def marketing_caps_room(*, requests: list[tuple[int, date]]) -> list[bool]:
    """For each (recipient id, local date), in order: whether the daily marketing cap
    has room for one more — what `marketing_caps_take` would answer, read without
    counting (one statement). A pair asked twice counts its first answer as taken."""
    if not requests:
        return []
    first = sorted(set(requests))
    with connection.cursor() as cursor:
        cursor.execute(
            f"""SELECT v.r, v.d, coalesce(m.count, 0)
                  FROM unnest(%(r)s::bigint[], %(d)s::date[]) AS v(r, d)
                  LEFT JOIN {MarketingDayCount._meta.db_table} m
                    ON m.recipient_id = v.r AND m.local_date = v.d""",
            {"r": array_literal(r for r, _ in first), "d": array_literal(d for _, d in first)},
        )
        used = {(r, d): count for r, d, count in cursor.fetchall()}
    answers = []
    for request in requests:
        answers.append(used[request] < settings.NOTIFY_MARKETING_DAILY_CAP)
        used[request] += 1
    return answers
