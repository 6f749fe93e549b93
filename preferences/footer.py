"""The words of the footer Notify adds to every email (the preference-center link, and the
one-click unsubscribe link in marketing), in the person's language.

The email channel puts them in the text and HTML bodies; this module only says them. A
campaign sends thousands of emails a second through the same few languages, so each
language's words are looked up once per process.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

from django.utils import translation
from django.utils.translation import gettext

from preferences.languages import person_language


@dataclass(frozen=True)
class FooterWords:
    unsubscribe: str  # the unsubscribe link's text
    preferences: str  # the preference-center link's text


@cache  # per language of settings.LANGUAGES: a handful
def _words(language: str) -> FooterWords:
    with translation.override(language):
        return FooterWords(
            unsubscribe=gettext("Unsubscribe"),
            preferences=gettext("Manage your notification preferences"),
        )


def email_footer_words(*, locale: str | None) -> FooterWords:
    """The footer's words for a person with this `locale` (Recipient.locale), in their
    language, else LANGUAGE_CODE's (never the reader's mail client's)."""
    return _words(person_language(locale))
