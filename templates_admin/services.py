"""Writes over templates: new versions are appended, publishing moves one pointer."""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.db.models import Max
from django.utils import timezone

from templates_admin.models import Template, TemplatePublication, TemplateVersion
from templates_admin.validation import CHANNEL_FIELDS, Problem, template_version_check

VERSION_FIELDS = ("subject", "html_body", "text_body", "title", "body", "url")


class TemplateInvalid(Exception):
    """The text cannot be saved; `problems` says why, in the author's words."""

    def __init__(self, problems: list[Problem]) -> None:
        super().__init__("; ".join(str(problem) for problem in problems))
        self.problems = problems


def template_version_create(
    *, template: Template, fields: dict[str, str], created_by: Any = None
) -> TemplateVersion:
    """Append a new draft version (versions are never edited in place)."""
    unknown = set(fields) - set(VERSION_FIELDS)
    if unknown:
        raise ValueError(f"unknown template fields: {', '.join(sorted(unknown))}")
    with transaction.atomic():
        Template.objects.select_for_update().filter(pk=template.pk).first()
        last = template.versions.aggregate(last=Max("number"))["last"] or 0
        return TemplateVersion.objects.create(
            template=template, number=last + 1, created_by=created_by, **fields
        )


def template_version_problems(*, template: Template, fields: dict[str, str]) -> list[Problem]:
    """What stops `fields` from becoming a version of `template` (empty when it may)."""
    category = template.category
    return template_version_check(
        channel=template.channel,
        locale=template.locale,
        fields=fields,
        schema=category.payload_schema or {},
        sample_payloads=category.sample_payloads or [],
        digest=category.digest_window_for(template.channel) is not None,
    )


def template_version_draft(
    *, template: Template, fields: dict[str, str], created_by: Any = None
) -> TemplateVersion:
    """Validate and append a draft; raises TemplateInvalid with every problem."""
    problems = template_version_problems(template=template, fields=fields)
    if problems:
        raise TemplateInvalid(problems)
    return template_version_create(template=template, fields=fields, created_by=created_by)


def template_version_publish(*, version: TemplateVersion, published_by: Any = None) -> None:
    """Make `version` the one in use and log who did it; deliveries already sent keep theirs.

    Publishing an older version is the rollback. The caller checks the permission
    (`templates_admin.publish_templateversion`); this function only records.
    """
    with transaction.atomic():
        Template.objects.filter(pk=version.template_id).update(published_version=version)
        if version.published_at is None:
            TemplateVersion.objects.filter(pk=version.pk).update(published_at=timezone.now())
        TemplatePublication.objects.create(version=version, published_by=published_by)


def published_templates_broken_by(
    *, category: Any, schema: dict[str, Any], sample_payloads: list[dict[str, Any]]
) -> list[tuple[Template, list[Problem]]]:
    """The category's published templates that a new schema or new samples would break
    (a variable the schema no longer has, a sample that no longer renders or fits)."""
    broken = []
    for template in Template.objects.filter(
        category=category, published_version__isnull=False
    ).select_related("published_version"):
        version = template.published_version
        problems = template_version_check(
            channel=template.channel,
            locale=template.locale,
            fields={
                name: getattr(version, name) for name in CHANNEL_FIELDS.get(template.channel, ())
            },
            schema=schema,
            sample_payloads=sample_payloads,
            digest=category.digest_window_for(template.channel) is not None,
        )
        if problems:
            broken.append((template, problems))
    return broken
