"""Reads over templates: which published version serves a (category, channel, locale)."""

from __future__ import annotations

from collections.abc import Iterable
from functools import lru_cache

from django.conf import settings
from django.db.models.expressions import RawSQL

from templates_admin.models import Template, TemplateVersion


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


def published_choices_sql(*, category_column: str, channel_column: str) -> RawSQL:
    """An SQL expression for a row query: `[[locale, version id], …]` of every published
    template of the row's (category, channel).

    Which version is published changes when staff publish, so it is read fresh in the
    same statement that loads the row; the version itself is immutable and comes from
    `template_version_cached`. The columns are SQL references of the outer query.
    """
    return RawSQL(
        f"""(SELECT coalesce(json_agg(json_build_array(t.locale, t.published_version_id)), '[]')
               FROM {Template._meta.db_table} t
              WHERE t.category_id = {category_column} AND t.channel = {channel_column}
                AND t.published_version_id IS NOT NULL)""",
        [],
    )


def published_version_pick(
    choices: Iterable[tuple[str, int]], *, locale: str
) -> TemplateVersion | None:
    """From `published_choices_sql`'s answer, the version for the locale (with fallback)."""
    by_locale = {str(choice_locale).lower(): version_id for choice_locale, version_id in choices}
    for candidate in locale_fallback_chain(locale):
        version_id = by_locale.get(candidate.lower())
        if version_id is not None:
            return template_version_cached(version_id)
    return None


@lru_cache(maxsize=4096)
def template_version_cached(version_id: int) -> TemplateVersion:
    """A version by id, kept in process memory: versions are immutable once saved."""
    return TemplateVersion.objects.select_related("template").get(pk=version_id)
