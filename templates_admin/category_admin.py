"""Categories' admin with one more check: a schema or digest change that would break a
published template is refused, naming the template, so the editor knows what to change
first. The core registers categories; their templates live here, so this app adds it."""

from __future__ import annotations

import copy
from typing import Any

from django.contrib import admin

from notify.admin import CategoryAdmin, CategoryForm
from notify.models import Category
from templates_admin.services import published_templates_broken_by


class CategoryTemplatesForm(CategoryForm):
    """The category form, refusing a schema change that would break a published
    template — it names the template, so the editor knows what to change first."""

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        if self.instance.pk is None or self.errors:
            return data
        # Checked with the digest settings as they will be saved: a window removed from
        # a channel must not leave its template listing `digest`.
        candidate = copy.copy(self.instance)
        candidate.mandatory = data.get("mandatory", candidate.mandatory)
        if isinstance(data.get("digest_windows"), dict):
            candidate.digest_windows = data["digest_windows"]
        schema_changed = any(
            data.get(name) != getattr(self.instance, name)
            for name in ("payload_schema", "sample_payloads")
        )
        for template, problems in published_templates_broken_by(
            category=candidate,
            schema=data.get("payload_schema") or {},
            sample_payloads=data.get("sample_payloads") or [],
        ):
            self.add_error(
                "payload_schema" if schema_changed else "digest_windows",
                f"The published template {template} would break: {problems[0]}",
            )
        return data


class CategoryTemplatesAdmin(CategoryAdmin):
    form = CategoryTemplatesForm


# The core registers categories; their templates live here, so this app adds the check.
admin.site.unregister(Category)
admin.site.register(Category, CategoryTemplatesAdmin)
