"""The hosted preference center's rules: which link opens it, what it shows, what a
submitted form changes, and revoking links.

The page itself (preferences/center_views.py) only renders and parses; every decision is
here. Cells are written through `preferences_update`, so each changed cell is a
`Preference` row and a `ConsentRecord` with source `preference_center` in one
transaction; quiet hours, time zone and language write a `SettingChange` each.
"""

from __future__ import annotations

import zoneinfo
from dataclasses import dataclass, field
from datetime import UTC, datetime, time, timedelta
from enum import Enum
from functools import cache

from django.db import transaction
from django.utils import timezone
from django.utils.functional import Promise
from django.utils.translation import pgettext_lazy

from notify.category_labels import category_text
from notify.models import Category, Channel, Recipient
from preferences.languages import local_time_text, person_language
from preferences.models import PreferenceCenterLinks
from preferences.selectors import offered_languages, preferences_document, quiet_window
from preferences.services import RequestOrigin, preferences_update, recipient_settings_change
from preferences.tokens import (
    LinkProblem,
    preference_center_token_read,
    preference_center_token_recipient_id,
)

# How a person calls each channel (the model's labels, "FCM mobile push", are staff's).
# A context of their own: a bare "Email" is django.contrib.auth's ("Email address").
CHANNEL_NAMES: dict[str, Promise] = {
    Channel.INAPP: pgettext_lazy("channel", "In-app"),
    Channel.EMAIL: pgettext_lazy("channel", "Email"),
    Channel.WEBPUSH: pgettext_lazy("channel", "Browser"),
    Channel.FCM: pgettext_lazy("channel", "Mobile app"),
    Channel.SMS: pgettext_lazy("channel", "SMS"),
}


class LinkRefusal(Enum):
    """Why a preference-center link opens nothing, as the page tells it."""

    TAMPERED = "tampered"  # 400: not a link we made
    EXPIRED = "expired"  # 410: ours, too old
    REVOKED = "revoked"  # 410: ours, withdrawn since it was sent
    GONE = "gone"  # 410: ours, the person's data was erased


def preference_center_recipient(*, token: str) -> Recipient | LinkRefusal:
    """The recipient a link opens the preference center for, or why it opens nothing.

    One query: the recipient joined with its revocation time, if any.
    """
    link = preference_center_token_read(token)
    if link is LinkProblem.EXPIRED:
        return LinkRefusal.EXPIRED
    if isinstance(link, LinkProblem):
        return LinkRefusal.TAMPERED
    recipient = (
        Recipient.objects.filter(pk=link.recipient_id)
        .select_related("preference_center_links")
        .first()
    )
    if recipient is None:
        return LinkRefusal.GONE
    revocation = getattr(recipient, "preference_center_links", None)
    if revocation is not None and link_revoked(
        issued_at_us=link.issued_at_us, valid_after=revocation.valid_after
    ):
        return LinkRefusal.REVOKED
    return recipient


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def refused_link_locale(*, token: str) -> str:
    """The locale of the person a refused link of ours names (expired, revoked), so the
    page saying why is in their language; "" for a link we did not make or a person erased."""
    recipient_id = preference_center_token_recipient_id(token)
    if recipient_id is None:
        return ""
    found = Recipient.objects.filter(pk=recipient_id).values_list("locale", flat=True).first()
    return found or ""


def link_revoked(*, issued_at_us: int, valid_after: datetime) -> bool:
    """A link minted before (or in the same microsecond as) the revocation is refused."""
    # Exact integer microseconds (a float timestamp can be one off).
    return issued_at_us <= (valid_after - _EPOCH) // timedelta(microseconds=1)


def preference_center_links_revoke(*, recipient: Recipient) -> datetime:
    """Refuse every preference-center link of the recipient minted until now (links in
    sent emails, links handed to the inbox). Links minted afterwards work. Returns the
    moment links stop working before."""
    now = timezone.now()
    PreferenceCenterLinks.objects.update_or_create(
        recipient=recipient, defaults={"valid_after": now}
    )
    return now


# --- What the page shows ------------------------------------------------------------------


@dataclass(frozen=True)
class CellView:
    channel: str
    channel_label: str | Promise  # translated when rendered
    offered: bool  # the category reaches the person on this channel at all
    enabled: bool
    locked: bool  # mandatory: always on, shown but not changeable


@dataclass(frozen=True)
class CategoryView:
    key: str
    label: str
    description: str  # in the person's language, or ""
    mandatory: bool
    marketing: bool
    cells: list[CellView]


@dataclass(frozen=True)
class CenterView:
    """Everything the page shows for one recipient."""

    channels: list[tuple[str, str | Promise]]  # (value, label), the table's columns
    categories: list[CategoryView]
    quiet_start: str  # HH:MM, local time
    quiet_end: str
    timezone: str
    locale: str
    languages: list[str]
    language: str  # the one the page is in (settings.LANGUAGES)
    quiet_text: tuple[str, str]  # the window as the person's locale writes times
    timezones: list[str] = field(repr=False, default_factory=list)


@cache
def known_timezones() -> tuple[str, ...]:
    """Every IANA zone name this machine knows, sorted (what the page offers)."""
    return tuple(sorted(zoneinfo.available_timezones()))


def preference_center_view(*, recipient: Recipient) -> CenterView:
    """The page's content: categories by channels (effective values, mandatory locked),
    quiet hours, time zone and language."""
    document = preferences_document(recipient=recipient)
    mandatory = set(document["mandatory"])
    categories = {c.key: c for c in Category.objects.all()}
    language = person_language(recipient.locale)
    rows = []
    for key, cells in document["categories"].items():
        category = categories[key]
        text = category_text(category, language=language)
        rows.append(
            CategoryView(
                key=key,
                label=text.label,
                description=text.description,
                mandatory=key in mandatory,
                marketing=category.marketing,
                cells=[
                    CellView(
                        channel=channel,
                        channel_label=CHANNEL_NAMES[channel],
                        offered=channel in cells,
                        enabled=cells.get(channel, False),
                        locked=key in mandatory,
                    )
                    for channel in Channel.values
                ],
            )
        )
    window = quiet_window(recipient=recipient)
    return CenterView(
        channels=[(channel, CHANNEL_NAMES[channel]) for channel in Channel.values],
        categories=rows,
        quiet_start=f"{window.start:%H:%M}",
        quiet_end=f"{window.end:%H:%M}",
        timezone=recipient.timezone or "UTC",
        locale=recipient.locale,
        languages=offered_languages(current=recipient.locale),
        language=language,
        quiet_text=(
            local_time_text(window.start, locale=recipient.locale),
            local_time_text(window.end, locale=recipient.locale),
        ),
        timezones=list(known_timezones()),
    )


# --- What a submitted form changes -------------------------------------------------------


@dataclass(frozen=True)
class CenterChoices:
    """A parsed form: the cells it showed and which of them are ticked, and the settings."""

    shown: set[tuple[str, str]]  # (category key, channel) the form displayed as editable
    ticked: set[tuple[str, str]]
    quiet_start: time
    quiet_end: time
    timezone: str
    locale: str


@dataclass(frozen=True)
class CenterSaved:
    cells_changed: int
    settings_changed: list[str]


def editable_cells(*, view: CenterView) -> set[tuple[str, str]]:
    """The cells a person may change: offered, and not in a mandatory category."""
    return {
        (row.key, cell.channel)
        for row in view.categories
        if not row.mandatory
        for cell in row.cells
        if cell.offered
    }


def preference_center_save(
    *, recipient: Recipient, choices: CenterChoices, origin: RequestOrigin
) -> CenterSaved:
    """Apply a submitted preference-center form in one transaction.

    Only cells that the form showed and that are editable now are written: a mandatory
    category's cell is never turned off, whatever the form says (a forged post is ignored,
    not an error), and a category added since the page was drawn is left alone rather
    than read as "unticked". Each changed cell writes its consent record; each changed
    setting writes a `SettingChange`. Unchanged values write nothing.
    """
    view = preference_center_view(recipient=recipient)
    current = {
        (row.key, cell.channel): cell.enabled for row in view.categories for cell in row.cells
    }
    cells: dict[str, dict[str, bool]] = {}
    for key, channel in choices.shown & editable_cells(view=view):
        wanted = (key, channel) in choices.ticked
        if wanted != current[(key, channel)]:
            cells.setdefault(key, {})[channel] = wanted
    with transaction.atomic():
        changed = preferences_update(recipient=recipient, cells=cells, origin=origin)
        settings_changed = recipient_settings_change(
            recipient=recipient,
            source=origin.source,
            quiet_hours=(choices.quiet_start, choices.quiet_end),
            timezone=choices.timezone,
            locale=choices.locale,
        )
    return CenterSaved(cells_changed=changed, settings_changed=settings_changed)
