"""A locale's template texts as a gettext PO file, so a translator works outside admin.

Export: for each category and channel, every non-empty field of the default locale's
published version is a `msgid`, the target locale's newest version's text (a draft
included: what "Edit (new draft)" would start from) the `msgstr`, and `msgctxt` is
`<category>/<channel>/<field>`, so two equal English texts stay two entries.

Import: per category and channel, the entries whose `msgstr` differs from the locale's newest
version become one new *draft* (the other fields copied from that version), validated as a
draft saved in admin is (syntax, variables, links, channel limits, render bounds). A draft
that fails is reported with its problems and the others are still created; nothing is ever
published. An empty `msgstr` means "not translated" and changes nothing.

PO files are read and written with Babel (`babel.messages`), already used for the site's
own catalogs.
"""

from __future__ import annotations

import io
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from babel.messages.catalog import Catalog
from babel.messages.pofile import PoFileError, read_po, write_po
from django.db import transaction
from django.db.models import Q, QuerySet

from notify.models import Category
from templates_admin.models import Template, TemplateVersion
from templates_admin.services import TemplateInvalid, template_version_draft
from templates_admin.translations import default_locale, is_default_locale, locale_key
from templates_admin.validation import CHANNEL_FIELDS, FIELD_LABELS

PROJECT = "Notify templates"
# A locale's every text is a few hundred KiB at most; a larger upload is not a PO of ours.
PO_FILE_MAX_BYTES = 2 * 1024 * 1024


class TranslationFileInvalid(Exception):
    """The file as a whole cannot be imported (not a PO file, too large, no language)."""


@dataclass
class ImportReport:
    """What an import did: drafts created, slots refused (with their problems), entries
    that could not be placed, and how many slots were already up to date."""

    locale: str
    created: list[TemplateVersion] = field(default_factory=list)
    failed: dict[str, list[str]] = field(default_factory=dict)
    skipped: list[str] = field(default_factory=list)
    unchanged: int = 0


def _slot(template: Template) -> str:
    return f"{template.category.key}/{template.channel}"


def _newest_versions(templates: Iterable[Template]) -> dict[int, TemplateVersion]:
    """Each template's newest version (draft or not), in one query."""
    ids = [template.pk for template in templates]
    newest = (
        TemplateVersion.objects.filter(template_id__in=ids)
        .order_by("template_id", "-number")
        .distinct("template_id")
    )
    return {version.template_id: version for version in newest}


def _locale_templates(locale: str, slots: Q) -> dict[tuple[int, str], Template]:
    """The locale's templates among `slots`, by (category id, channel)."""
    wanted = locale_key(locale)
    candidates = Template.objects.filter(slots).select_related("category")
    return {(t.category_id, t.channel): t for t in candidates if locale_key(t.locale) == wanted}


def _new_catalog(locale: str) -> Catalog:
    """An empty catalog whose `Language` header names `locale` (Babel spells it `ru_RU`)."""
    options: dict[str, Any] = {"project": PROJECT, "language_team": locale, "fuzzy": False}
    try:
        catalog = Catalog(locale=locale.replace("-", "_"), **options)
    except ValueError:  # not a locale name Babel can spell: the import must be told it
        catalog = Catalog(**options)
    catalog.header_comment = f"# {PROJECT}: {locale} translations of {default_locale()}."
    return catalog


def translations_export(*, locale: str, templates: QuerySet | None = None) -> bytes:
    """The PO file of `locale` for the category and channel of each of `templates` (every
    category and channel when None) that has a published default-locale version."""
    if is_default_locale(locale):
        raise ValueError(f"{locale} is the default locale: its texts are the sources.")
    sources = Template.objects.filter(
        locale__iexact=locale_key(default_locale()), published_version__isnull=False
    ).select_related("category", "published_version")
    if templates is not None:
        pairs = set(templates.values_list("category_id", "channel"))
        sources = sources.filter(_pairs_q(pairs))
    sources = sorted(sources, key=lambda t: (t.category.key, t.channel))
    targets = _locale_templates(locale, _pairs_q({(t.category_id, t.channel) for t in sources}))
    newest = _newest_versions(targets.values())
    catalog = _new_catalog(locale)
    for source in sources:
        version = source.published_version
        target = targets.get((source.category_id, source.channel))
        current = newest.get(target.pk) if target else None
        for name in CHANNEL_FIELDS.get(source.channel, ()):
            text = getattr(version, name)
            if not text:
                continue
            published = version.published_at.date().isoformat() if version.published_at else "?"
            catalog.add(
                text,
                getattr(current, name) if current else "",
                context=f"{_slot(source)}/{name}",
                auto_comments=[
                    f"{FIELD_LABELS[name]}; {source.locale} v{version.number}, "
                    f"published {published}"
                ],
            )
    out = io.BytesIO()
    write_po(out, catalog, width=0, include_lineno=False)
    return out.getvalue()


def _pairs_q(pairs: Iterable[tuple[int, str]]) -> Q:
    query = Q(pk__in=[])
    for category_id, channel in pairs:
        query |= Q(category_id=category_id, channel=channel)
    return query


def _read(content: bytes) -> Catalog:
    if len(content) > PO_FILE_MAX_BYTES:
        raise TranslationFileInvalid(
            f"The file is larger than {PO_FILE_MAX_BYTES // 1024} KiB: not a translation file."
        )
    try:
        return read_po(io.BytesIO(content), abort_invalid=True)
    except (PoFileError, ValueError, UnicodeDecodeError) as error:
        raise TranslationFileInvalid(f"This is not a readable PO file: {error}") from error


def _wanted_texts(catalog: Catalog, report: ImportReport) -> dict[str, dict[str, str]]:
    """The translated entries by "category/channel", then field; the others noted."""
    wanted: dict[str, dict[str, str]] = {}
    for message in catalog:
        if not message.id or not message.context or not message.string:
            continue  # the header, or not translated: nothing to change
        parts = message.context.rsplit("/", 2)
        if len(parts) != 3 or parts[2] not in CHANNEL_FIELDS.get(parts[1], ()):
            report.skipped.append(f"{message.context}: not a field of a template.")
        elif not isinstance(message.string, str):
            report.skipped.append(f"{message.context}: plural forms are not template texts.")
        else:
            wanted.setdefault(f"{parts[0]}/{parts[1]}", {})[parts[2]] = message.string
    return wanted


def translations_import(
    *, content: bytes, locale: str | None = None, created_by: Any = None, may_add: bool = False
) -> ImportReport:
    """Create a draft per category and channel whose texts the PO file changes (see the
    module docstring). `locale` defaults to the file's `Language` header. `may_add`: a
    category and channel without a template in the locale gets one (with its draft; the
    caller checks the right to add templates), else it is reported."""
    catalog = _read(content)
    locale = locale or (catalog.locale_identifier or "").replace("_", "-")
    if not locale:
        raise TranslationFileInvalid("The file names no language: give the locale.")
    if is_default_locale(locale):
        raise TranslationFileInvalid(
            f"{locale} is the default locale: its texts are the sources; edit them in admin."
        )
    report = ImportReport(locale=locale)
    wanted = _wanted_texts(catalog, report)
    slots = Q(pk__in=[])
    for slot in wanted:
        key, channel = slot.rsplit("/", 1)
        slots |= Q(category__key=key, channel=channel)
    templates = {_slot(t): t for t in _locale_templates(locale, slots).values()}
    categories = {
        c.key: c for c in Category.objects.filter(key__in=[s.rsplit("/", 1)[0] for s in wanted])
    }
    newest = _newest_versions(templates.values())
    for slot, texts in sorted(wanted.items()):
        key, channel = slot.rsplit("/", 1)
        template = templates.get(slot)
        if template is None and not (may_add and key in categories):
            report.failed[slot] = [f"there is no {locale} template for {slot}: add it in admin."]
            continue
        base = newest.get(template.pk) if template else None
        fields = {name: getattr(base, name) if base else "" for name in CHANNEL_FIELDS[channel]}
        changed = {name: text for name, text in texts.items() if text != fields[name]}
        if not changed:
            report.unchanged += 1
            continue
        try:
            with transaction.atomic():  # a new template goes if its first draft is refused
                if template is None:
                    template = Template.objects.create(
                        category=categories[key], channel=channel, locale=locale
                    )
                version = template_version_draft(
                    template=template, fields={**fields, **changed}, created_by=created_by
                )
        except TemplateInvalid as error:
            report.failed[slot] = [str(problem) for problem in error.problems]
        else:
            report.created.append(version)
    return report
