"""Rendering one field of a template version with the channel's escaping: the engines
and compiled-template cache shared by every channel's rendering (`rendering`) and by
email through templated-mail (`mail`). Each field renders within the time and output
bounds of `templates_admin.bounds` (validation, preview and sending alike)."""

from __future__ import annotations

import html as html_lib
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.template import Context
from django.template.base import Template as DjangoTemplate
from django.utils.html import strip_tags
from django.utils.text import normalize_newlines

from templates_admin.bounds import bounded_template, render_budget_end, render_budget_start
from templates_admin.filters import recipient_settings_enter, recipient_settings_exit, safe_engine

if TYPE_CHECKING:
    from templates_admin.models import TemplateVersion

# Two engines: HTML email bodies are autoescaped; everything a user reads as plain text
# (subject, text body, push, SMS, in-app) is not, so `<b>` stays `<b>`, never `&lt;b&gt;`.
_HTML_ENGINE = safe_engine(autoescape=True)
_TEXT_ENGINE = safe_engine(autoescape=False)


@lru_cache(maxsize=4096)
def _compiled(version_id: int | None, field: str, source: str, html: bool) -> DjangoTemplate:
    engine = _HTML_ENGINE if html else _TEXT_ENGINE
    return bounded_template(engine.from_string(source))


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
    # Set and reset by hand, not by two `with` blocks: on a short field their generators
    # cost as much as the render (an email renders three fields).
    recipient = recipient_settings_enter(locale=lang, timezone=zone)
    try:
        budget = render_budget_start()
        try:
            template = _compiled(version.pk, field, source, html)
            return _rendered(template, Context(context, autoescape=html)).strip()
        finally:
            render_budget_end(budget)
    finally:
        recipient_settings_exit(recipient)


def _rendered(template: DjangoTemplate, context: Context) -> str:
    """`template.render(context)` for a plain Context made for this one render.

    Django's `render` binds the template to the context and gives it a render state of
    its own, each in a generator context manager that undoes it afterwards: as much CPU
    as a short field's whole render. A fresh context that is dropped after the render
    needs nothing undone, so the same state is set here directly.
    """
    context.template = context.render_context.template = template
    context.template_name = template.name
    context.render_context.push()
    return template._render(context)


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
