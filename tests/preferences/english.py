"""Finding English that shows through a page meant for another language.

What is looked for are the source strings of our catalogs — the msgids of the Django
catalog (preferences/locale), the `en` catalog of `<notify-inbox>` — whose translation
differs ("SMS" is "SMS" in Russian too): each piece between placeholders, as a whole word
or phrase. So a string someone adds in English and forgets to translate, or a page that
renders in the wrong language, fails the test that shows it."""

from __future__ import annotations

import re
from collections.abc import Iterable
from html.parser import HTMLParser

from babel.messages.pofile import read_po

from tests.processes import ROOT

DJANGO_CATALOG = ROOT / "preferences" / "locale" / "{language}" / "LC_MESSAGES" / "django.po"
_PLACEHOLDER = re.compile(r"%\(\w+\)s|\{\w+\}")
# What a piece of a sentence is trimmed of: the punctuation around a placeholder.
_EDGES = " \n:;,.()\u2013\u2014«»“”"


def english_pieces(pairs: Iterable[tuple[str, str]]) -> list[str]:
    """The English to look for: the pieces of each source string whose translation differs
    (longest first), those with at least two letters."""
    pieces = set()
    for source, translated in pairs:
        if not source or source == translated:
            continue
        for piece in _PLACEHOLDER.split(source):
            piece = piece.strip(_EDGES)
            if sum(ch.isalpha() for ch in piece) >= 2:
                pieces.add(piece)
    return sorted(pieces, key=len, reverse=True)


def django_pieces(language: str = "ru") -> list[str]:
    """`english_pieces` of the Django catalog's msgids (as they are in `language`'s .po)."""
    with open(str(DJANGO_CATALOG).format(language=language), "rb") as source:
        catalog = read_po(source)
    return english_pieces((m.id, m.string) for m in catalog if m.id and isinstance(m.id, str))


def english_shown(text: str, pieces: Iterable[str]) -> list[str]:
    """The pieces found in `text`, each as a whole word or phrase."""
    return [p for p in pieces if re.search(rf"(?<!\w){re.escape(p)}(?!\w)", text)]


class PageText(HTMLParser):
    """What a person reads or hears on a page: text (not styles or scripts, nor the
    time-zone list, which is IANA's names) and the accessible names and titles."""

    SPOKEN = ("aria-label", "title", "placeholder", "alt")

    def __init__(self) -> None:
        super().__init__()
        self.parts: list[str] = []
        self._skip: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        self.parts += [a[name] or "" for name in self.SPOKEN if name in a]
        if tag in ("style", "script") or (tag == "select" and a.get("name") == "timezone"):
            self._skip.append(tag)

    def handle_endtag(self, tag: str) -> None:
        if self._skip and self._skip[-1] == tag:
            self._skip.pop()

    def handle_data(self, data: str) -> None:
        if not self._skip and data.strip():
            self.parts.append(data.strip())

    @classmethod
    def of(cls, html: str) -> str:
        reader = cls()
        reader.feed(html)
        return "\n".join(reader.parts)
