"""Translations that do not rot: which locales of a category and channel are older than the
default locale's text, and which payload fields a newly published default text uses that
another locale's published text does not.

The default locale is `NOTIFY_DEFAULT_LOCALE`, the one rendering falls back to: its
published versions are the sources every other locale translates. A locale is *outdated*
when the default locale's published version was published after this locale's published
version (both as first published: `TemplateVersion.published_at`; a rollback republishes
an older text, which is no newer for it). A locale with nothing published is missing, not
outdated; the default locale is never outdated.
"""

from __future__ import annotations

from django.conf import settings
from django.db.models import BooleanField, Case, F, OuterRef, Q, QuerySet, Subquery, When

from templates_admin.models import Template, TemplateVersion
from templates_admin.validation import CHANNEL_FIELDS, template_payload_variables


def default_locale() -> str:
    """The locale whose published texts are the sources of every translation."""
    return settings.NOTIFY_DEFAULT_LOCALE


def locale_key(locale: str) -> str:
    """A locale compared as people mean it: `ru_RU`, `ru-ru` and `ru-RU` are one."""
    return locale.replace("_", "-").strip().lower()


def is_default_locale(locale: str) -> bool:
    """Whether `locale` is the default locale (the translations' source)."""
    return locale_key(locale) == locale_key(default_locale())


def templates_with_translation_state(queryset: QuerySet[Template]) -> QuerySet[Template]:
    """`queryset` with, on every row and in the same statement: `latest_number` (its newest
    version), `default_locale_name` / `default_number` / `default_published_at` (the
    default locale's published version of the same category and channel) and `outdated`
    (see the module docstring)."""
    default = locale_key(default_locale())
    source = Template.objects.filter(
        category_id=OuterRef("category_id"),
        channel=OuterRef("channel"),
        locale__iexact=default,
        published_version__isnull=False,
    )
    latest = TemplateVersion.objects.filter(template_id=OuterRef("pk")).order_by("-number")
    return queryset.annotate(
        latest_number=Subquery(latest.values("number")[:1]),
        default_locale_name=Subquery(source.values("locale")[:1]),
        default_number=Subquery(source.values("published_version__number")[:1]),
        default_published_at=Subquery(source.values("published_version__published_at")[:1]),
    ).annotate(
        outdated=Case(
            When(
                ~Q(locale__iexact=default)
                & Q(published_version__published_at__lt=F("default_published_at")),
                then=True,
            ),
            default=False,
            output_field=BooleanField(),
        )
    )


def version_payload_variables(version: TemplateVersion) -> set[str]:
    """The payload fields any of the version's channel fields reads."""
    names: set[str] = set()
    for field in CHANNEL_FIELDS.get(version.template.channel, ()):
        names |= template_payload_variables(getattr(version, field))
    return names


def published_locales_missing_fields(*, version: TemplateVersion) -> dict[str, list[str]]:
    """For a default-locale version: each other locale (as `ru v1`) whose published version
    of the same category and channel reads none of some payload fields this version reads,
    with those fields. Empty for a version of any other locale."""
    template = version.template
    if not is_default_locale(template.locale):
        return {}
    used = version_payload_variables(version)
    if not used:
        return {}
    others = (
        Template.objects.filter(
            category_id=template.category_id,
            channel=template.channel,
            published_version__isnull=False,
        )
        .exclude(pk=template.pk)
        .select_related("published_version")
        .order_by("locale")
    )
    missing = {}
    for other in others:
        other.published_version.template = other  # its channel, without another query
        lacking = used - version_payload_variables(other.published_version)
        if lacking:
            missing[f"{other.locale} v{other.published_version.number}"] = sorted(lacking)
    return missing


def publish_warning(*, version: TemplateVersion) -> str | None:
    """The warning admin shows after publishing a default-locale version that reads payload
    fields other locales' published versions do not (they still publish: it is a warning)."""
    missing = published_locales_missing_fields(version=version)
    if not missing:
        return None
    lacks = "; ".join(f"{locale} does not use {', '.join(f)}" for locale, f in missing.items())
    return (
        f"{version.template.locale} v{version.number} uses payload fields the other "
        f"locales' published versions do not: {lacks}. Update their translations."
    )
