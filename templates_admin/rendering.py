"""Rendering a template version: a pure function of (version, context) (R-T3).

No database, no network. Versions are immutable, so compiled templates are cached by
version id (and source, so an unsaved preview draft never reuses a stale compile). The
context holds JSON data only (see `build_context`), so a template can reach nothing but
the event payload and a few safe recipient fields; the engines know only the allow-list
in `templates_admin.filters`.

Locale and time zone come from `context["recipient"]` (the sender always puts them there);
`locale=` / `timezone=` override them, e.g. for an admin preview in another language.
"""

from __future__ import annotations

import html as html_lib
import json
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.template import Context
from django.template.base import Template as DjangoTemplate
from django.utils.html import strip_tags
from django.utils.text import normalize_newlines

from notify.models import Channel
from templates_admin.filters import recipient_settings, safe_engine

if TYPE_CHECKING:
    from templates_admin.models import TemplateVersion

# Two engines: HTML email bodies are autoescaped; everything a user reads as plain text
# (subject, text body, push, SMS, in-app) is not, so `<b>` stays `<b>`, never `&lt;b&gt;`.
_HTML_ENGINE = safe_engine(autoescape=True)
_TEXT_ENGINE = safe_engine(autoescape=False)

PUSH_CHANNELS = (Channel.WEBPUSH, Channel.FCM)
ELLIPSIS = "…"


@dataclass(frozen=True)
class RenderedMessage:
    """What one channel shows. Fields a channel does not use stay empty."""

    subject: str = ""
    text: str = ""
    html: str = ""
    title: str = ""
    body: str = ""
    url: str = ""


def build_context(payload: dict[str, Any], *, recipient: dict[str, str]) -> dict[str, Any]:
    """The template context: the payload plus `recipient`, reduced to plain JSON data."""
    data = {**payload, "recipient": recipient}
    # A JSON round trip guarantees dicts, lists, strings, numbers, booleans and None only.
    return json.loads(json.dumps(data, default=str))


@lru_cache(maxsize=4096)
def _compiled(version_id: int | None, field: str, source: str, html: bool) -> DjangoTemplate:
    engine = _HTML_ENGINE if html else _TEXT_ENGINE
    return engine.from_string(source)


def _recipient_locale(context: dict[str, Any], locale: str | None, timezone: str | None):
    recipient = context.get("recipient") if isinstance(context.get("recipient"), dict) else {}
    return (
        locale or str(recipient.get("locale") or "") or settings.NOTIFY_DEFAULT_LOCALE,
        timezone or str(recipient.get("timezone") or "") or settings.NOTIFY_DEFAULT_TIMEZONE,
    )


def render_field(
    version: TemplateVersion,
    field: str,
    context: dict[str, Any],
    *,
    html: bool = False,
    locale: str | None = None,
    timezone: str | None = None,
) -> str:
    """Render one field of a version (e.g. `subject`) with the channel's escaping."""
    source = getattr(version, field)
    if not source:
        return ""
    lang, zone = _recipient_locale(context, locale, timezone)
    with recipient_settings(locale=lang, timezone=zone):
        template = _compiled(version.pk, field, source, html)
        return template.render(Context(context, autoescape=html)).strip()


def html_to_text(html: str) -> str:
    """A readable plain-text body from an HTML one, for when the author left it empty."""
    # Tags go, then entities are decoded: the text part shows `<b>`, never `&lt;b&gt;`.
    text = html_lib.unescape(strip_tags(normalize_newlines(html)))
    lines = [line.strip() for line in text.splitlines()]
    collapsed: list[str] = []
    for line in lines:
        if line or (collapsed and collapsed[-1]):
            collapsed.append(line)
    return "\n".join(collapsed).strip()


def truncate_at_word(text: str, limit: int) -> str:
    """Cut `text` to at most `limit` characters at a word boundary, ending with `…`."""
    if len(text) <= limit:
        return text
    room = text[: limit - len(ELLIPSIS) + 1]
    # Cut before the last partial word; a single giant word is cut where it must be.
    cut = room[: room.rfind(" ")] if " " in room.strip() else room[: limit - len(ELLIPSIS)]
    cut = cut.rstrip(" ,;:-.\u2013\u2014")
    return (cut or text[: limit - len(ELLIPSIS)]) + ELLIPSIS


def render_version(
    version: TemplateVersion,
    context: dict[str, Any],
    *,
    locale: str | None = None,
    timezone: str | None = None,
    truncate: bool = True,
) -> RenderedMessage:
    """Render every field the version's channel uses.

    Push title and body are cut to the channel limits unless `truncate=False` (validation
    measures the full text so the author learns the sample payloads do not fit).
    """
    channel = version.template.channel
    if channel == Channel.EMAIL:
        from templates_admin.mail import VersionEmailMessage

        message = VersionEmailMessage(
            version=version, context=context, locale=locale, timezone=timezone
        )
        message.render()
        return RenderedMessage(subject=message.subject, text=message.body, html=message.html)
    fields = {
        name: render_field(version, name, context, locale=locale, timezone=timezone)
        for name in ("title", "body", "url")
    }
    if channel in PUSH_CHANNELS and truncate:
        fields["title"] = truncate_at_word(fields["title"], settings.NOTIFY_PUSH_TITLE_MAX_CHARS)
        fields["body"] = truncate_at_word(fields["body"], settings.NOTIFY_PUSH_BODY_MAX_CHARS)
    if channel == Channel.SMS:
        return RenderedMessage(body=fields["body"])
    return RenderedMessage(**fields)
