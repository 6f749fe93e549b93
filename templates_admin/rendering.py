"""Rendering a template version: a pure function of (version, context).

No database, no network. Versions are immutable, so compiled templates are cached by
version id (and source, so an unsaved preview draft never reuses a stale compile). The
context holds JSON data only (see `build_context`), so a template can reach nothing but
the event payload and a few safe recipient fields; the engines know only the allow-list
in `templates_admin.filters`.

Locale and time zone come from `context["recipient"]` (the sender always puts them there);
`locale=` / `timezone=` override them, e.g. for an admin preview in another language.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from django.conf import settings

from notify.models import PUSH_CHANNELS, Channel
from templates_admin.fields import html_to_text, render_field
from templates_admin.mail import VersionEmailMessage

if TYPE_CHECKING:
    from templates_admin.models import TemplateVersion

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


def recipient_context(payload: dict[str, Any], recipient: Any) -> dict[str, Any]:
    """The context every channel renders a notification with: its payload and the
    recipient's id, locale and time zone (`recipient` is a notify Recipient).

    The payload is a stored notification's, decoded from its JSON column, so it is
    plain JSON data already and is not sent through JSON again as `build_context` does
    (per delivery, that round trip was a tenth of a campaign worker's CPU).
    """
    return {
        **payload,
        "recipient": {
            "user_id": recipient.user_id,
            "locale": recipient.locale,
            "timezone": recipient.timezone,
        },
    }


# The variable a digest's template sees (docs/digests.md): `digest.count`, `digest.events`
# (each with `payload` and `occurred_at`), `digest.first_at` and `digest.last_at`.
DIGEST_VARIABLE = "digest"
DIGEST_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "count": {"type": "integer"},
        "events": {"type": "array"},
        "first_at": {"type": "string"},
        "last_at": {"type": "string"},
        "more": {"type": "integer"},
    },
}


def digest_context(events: list[tuple[dict[str, Any], Any]], *, count: int, limit: int) -> dict:
    """What a digest's template sees of its events ((payload, occurred_at) in order):
    how many there were, the first `limit` of them, and the first and last times (ISO
    8601; the `date` filters format them in the recipient's zone)."""
    shown = events[:limit]

    def at(value: Any) -> str:
        return value.isoformat() if hasattr(value, "isoformat") else str(value or "")

    return {
        "count": max(count, len(events)),
        "events": [{"payload": payload, "occurred_at": at(when)} for payload, when in shown],
        "first_at": at(events[0][1]) if events else "",
        "last_at": at(events[-1][1]) if events else "",
        "more": max(count, len(events)) - len(shown),
    }


def digest_sample_context(payloads: list[dict[str, Any]]) -> dict:
    """A digest of sample events (the category's sample payloads, one a minute apart),
    for validation at save and the admin preview."""
    events = [(p, f"2026-01-01T09:{index:02d}:00+00:00") for index, p in enumerate(payloads)]
    return digest_context(
        events or [({}, "2026-01-01T09:00:00+00:00")],
        count=len(events) or 1,
        limit=len(events) or 1,
    )


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


# Re-exported: callers render fields through this module.
__all__ = [
    "RenderedMessage",
    "build_context",
    "html_to_text",
    "render_field",
    "render_version",
    "truncate_at_word",
]
