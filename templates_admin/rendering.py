"""Rendering a template version: a pure function of (version, context).

No database, no network. Versions are immutable, so compiled templates are cached by
version id. The context holds JSON data only (see `build_context`), so a template can
reach nothing but the event payload and a few safe recipient fields.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from django.template import Context, Engine
from django.template.base import Template as DjangoTemplate
from django.utils.html import strip_tags
from django.utils.text import normalize_newlines

from notify.models import Channel

if TYPE_CHECKING:
    from templates_admin.models import TemplateVersion

# Two engines: HTML email bodies are autoescaped; everything a user reads as plain text
# (subject, text body, push, SMS, in-app) is not, so `<b>` stays `<b>`, never `&lt;b&gt;`.
_HTML_ENGINE = Engine(autoescape=True)
_TEXT_ENGINE = Engine(autoescape=False)


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
def _compiled(version_id: int, field: str, source: str, html: bool) -> DjangoTemplate:
    engine = _HTML_ENGINE if html else _TEXT_ENGINE
    return engine.from_string(source)


def render_field(
    version: TemplateVersion, field: str, context: dict[str, Any], *, html: bool = False
) -> str:
    """Render one field of a version (e.g. `subject`) with the channel's escaping."""
    source = getattr(version, field)
    if not source:
        return ""
    template = _compiled(version.pk, field, source, html)
    return template.render(Context(context, autoescape=html)).strip()


def html_to_text(html: str) -> str:
    """A readable plain-text body from an HTML one, for when the author left it empty."""
    text = strip_tags(normalize_newlines(html))
    lines = [line.strip() for line in text.splitlines()]
    collapsed: list[str] = []
    for line in lines:
        if line or (collapsed and collapsed[-1]):
            collapsed.append(line)
    return "\n".join(collapsed).strip()


def render_version(version: TemplateVersion, context: dict[str, Any]) -> RenderedMessage:
    """Render every field the version's channel uses."""
    channel = version.template.channel
    if channel == Channel.EMAIL:
        from templates_admin.mail import VersionEmailMessage

        message = VersionEmailMessage(version=version, context=context)
        message.render()
        return RenderedMessage(subject=message.subject, text=message.body, html=message.html)
    return RenderedMessage(
        title=render_field(version, "title", context),
        body=render_field(version, "body", context),
        url=render_field(version, "url", context),
    )
