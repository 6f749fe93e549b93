"""Writes over templates: new versions are appended, publishing moves one pointer."""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.db.models import Max
from django.utils import timezone

from templates_admin.models import Template, TemplateVersion

VERSION_FIELDS = ("subject", "html_body", "text_body", "title", "body", "url")


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


def template_version_publish(*, version: TemplateVersion) -> None:
    """Make `version` the one in use; deliveries already sent keep theirs."""
    with transaction.atomic():
        Template.objects.filter(pk=version.template_id).update(published_version=version)
        if version.published_at is None:
            TemplateVersion.objects.filter(pk=version.pk).update(published_at=timezone.now())
