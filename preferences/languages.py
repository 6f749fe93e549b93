"""The language and formats a person sees Notify's own words in: the preference center,
the unsubscribe page and the email footer.

The language is the person's `locale` (Recipient.locale, e.g. `ru-RU` → `ru`), else
LANGUAGE_CODE's, matched against settings.LANGUAGES; it is activated around rendering
with `translation.override`. These pages belong to one person and are opened from their
email, often in another browser than theirs (a mail app's, a shared computer's), so the
browser's Accept-Language is never consulted. Dates and times are formatted by Babel in
the person's locale and time zone, as templates_admin formats them in templates.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, time
from functools import lru_cache
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from babel import Locale, UnknownLocaleError
from babel.dates import format_datetime, format_time
from django.conf import settings
from django.utils import translation


def _supported(tag: str) -> str | None:
    # Django's own lookup is cached (and forgets when LANGUAGES changes).
    try:
        return translation.get_supported_language_variant(tag)
    except LookupError:
        return None


def person_language(locale: str | None) -> str:
    """The code of settings.LANGUAGES a person with this `locale` reads (`ru-RU` → `ru`),
    else LANGUAGE_CODE's (`en-us` → `en`)."""
    tag = (locale or "").strip().replace("_", "-")
    return (tag and _supported(tag)) or _supported(settings.LANGUAGE_CODE) or "en"


@contextmanager
def person_translation(locale: str | None) -> Iterator[str]:
    """Translate into the person's language inside the block; yields its code."""
    language = person_language(locale)
    with translation.override(language):
        yield language


@lru_cache(maxsize=256)  # one per tag people have: a few
def babel_locale(locale: str | None) -> Locale:
    """Babel's locale for formatting: the person's own tag (`ru-RU` keeps its region),
    else their language's."""
    for candidate in ((locale or "").replace("-", "_"), person_language(locale)):
        try:
            return Locale.parse(candidate)
        except (UnknownLocaleError, ValueError, TypeError):
            continue
    return Locale("en")


def person_zone(name: str | None) -> ZoneInfo:
    """The person's time zone, UTC when unset or unknown."""
    try:
        return ZoneInfo(name or "UTC")
    except (ZoneInfoNotFoundError, ValueError):
        return ZoneInfo("UTC")


def local_time_text(value: time, *, locale: str | None) -> str:
    """A wall-clock time as the person's locale writes it (21:00, 9:00 PM)."""
    return format_time(value, format="short", locale=babel_locale(locale))


def local_moment_text(moment: datetime, *, locale: str | None, timezone: str | None) -> str:
    """A moment in the person's time zone, as their locale writes a date and time."""
    return format_datetime(
        moment, format="medium", tzinfo=person_zone(timezone), locale=babel_locale(locale)
    )


def language_name(tag: str) -> str:
    """A language as its own speakers write it (`ru` → `русский (ru)`), so a person finds
    theirs in a list whatever the page's language; the tag alone when Babel has no name."""
    try:
        name = Locale.parse(tag.replace("-", "_")).get_display_name()
    except (UnknownLocaleError, ValueError, TypeError):
        return tag
    return f"{name} ({tag})" if name else tag
