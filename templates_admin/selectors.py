"""Reads over templates: which published version serves a (category, channel, locale)."""

from __future__ import annotations

from django.conf import settings
from django.db.models import F

from templates_admin.models import TemplateVersion


def locale_fallback_chain(locale: str, *, default: str | None = None) -> list[str]:
    """`ru-RU` → [`ru-RU`, `ru`, default]; duplicates removed, order kept."""
    default = default or settings.NOTIFY_DEFAULT_LOCALE
    chain: list[str] = []
    normalized = locale.replace("_", "-").strip()
    if normalized:
        chain.append(normalized)
        language = normalized.split("-")[0].lower()
        chain.append(language)
    chain.append(default)
    seen: set[str] = set()
    return [item for item in chain if not (item.lower() in seen or seen.add(item.lower()))]


def published_version_for(*, category_id: int, channel: str, locale: str) -> TemplateVersion | None:
    """The published version for the recipient's locale, falling back to the default."""
    chain = locale_fallback_chain(locale)
    versions = TemplateVersion.objects.select_related("template").filter(
        template__category_id=category_id,
        template__channel=channel,
        template__locale__in=chain,
        template__published_version_id=F("id"),
    )
    by_locale = {version.template.locale.lower(): version for version in versions}
    for candidate in chain:
        if candidate.lower() in by_locale:
            return by_locale[candidate.lower()]
    return None
