"""The template admin's translation tools: the "outdated" column and filter, the PO export
action and the PO import page (see `templates_admin.translations` and
`templates_admin.translation_files` for the rules). `TemplateAdmin` mixes them in."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.urls import path
from django.utils.html import format_html

from templates_admin.models import Template
from templates_admin.translation_files import (
    PO_FILE_MAX_BYTES,
    TranslationFileInvalid,
    translations_export,
    translations_import,
)
from templates_admin.translations import (
    default_locale,
    is_default_locale,
    templates_with_translation_state,
)

# Importing creates drafts, so it takes the right to save a draft.
IMPORT_PERMISSION = "templates_admin.add_templateversion"


class OutdatedFilter(admin.SimpleListFilter):
    """Templates whose locale is older than the default locale's published text."""

    title = "translation"
    parameter_name = "outdated"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [("yes", "Outdated"), ("no", "Up to date")]

    def queryset(self, request: HttpRequest, queryset: QuerySet) -> QuerySet:
        if self.value() in ("yes", "no"):
            return queryset.filter(outdated=self.value() == "yes")
        return queryset


class ImportForm(forms.Form):
    file = forms.FileField(label="PO file", help_text="As exported, with the msgstr edited.")
    locale = forms.CharField(
        required=False,
        max_length=35,
        help_text="Leave empty to use the file's Language header.",
    )

    def clean_file(self) -> Any:
        upload = self.cleaned_data["file"]
        if upload.size > PO_FILE_MAX_BYTES:
            raise forms.ValidationError(
                f"The file is larger than {PO_FILE_MAX_BYTES // 1024} KiB: not a translation file."
            )
        return upload


class TranslationAdminMixin:
    """What `TemplateAdmin` gains for translators (list annotations, export, import)."""

    actions = ["export_translations"]

    def get_queryset(self, request: HttpRequest) -> QuerySet[Template]:
        # One statement for the whole page: latest and default versions are subqueries.
        return templates_with_translation_state(super().get_queryset(request))

    @admin.display(description="translation", ordering="outdated")
    def outdated(self, obj: Template) -> str:
        if not obj.outdated:
            return "—"
        return format_html(
            '<span class="outdated">older than {} v{}</span>',
            obj.default_locale_name,
            obj.default_number,
        )

    @admin.action(description="Export translations of the selected templates (.po)")
    def export_translations(self, request: HttpRequest, queryset: QuerySet) -> HttpResponse | None:
        locales = sorted({t.locale for t in queryset if not is_default_locale(t.locale)})
        if len(locales) != 1:
            messages.error(
                request,
                f"Select the templates of one locale other than {default_locale()} "
                f"(the selection has {', '.join(locales) or 'none'}).",
            )
            return None
        content = translations_export(locale=locales[0], templates=queryset)
        response = HttpResponse(content, content_type="text/x-gettext-translation; charset=utf-8")
        response["Content-Disposition"] = f'attachment; filename="templates-{locales[0]}.po"'
        return response

    def get_urls(self) -> list:
        view = self.admin_site.admin_view(self.import_translations_view)
        name = "templates_admin_template_import_translations"
        return [path("import-translations/", view, name=name), *super().get_urls()]

    def import_translations_view(self, request: HttpRequest) -> HttpResponse:
        """Upload a PO file: a new draft per changed category and channel, never published."""
        if not request.user.has_perm(IMPORT_PERMISSION):
            raise PermissionDenied
        report = None
        form = ImportForm(request.POST or None, request.FILES or None)
        if request.method == "POST" and form.is_valid():
            try:
                report = translations_import(
                    content=form.cleaned_data["file"].read(),
                    locale=form.cleaned_data["locale"].strip() or None,
                    created_by=request.user,
                    may_add=request.user.has_perm("templates_admin.add_template"),
                )
            except TranslationFileInvalid as error:
                form.add_error("file", str(error))
            else:
                if report.failed:
                    messages.error(request, f"{len(report.failed)} draft(s) were not created.")
                messages.info(request, f"{len(report.created)} draft(s) created, none published.")
        context = {
            **self.admin_site.each_context(request),
            "opts": self.model._meta,
            "title": "Import translations",
            "form": form,
            "report": report,
            "default_locale": default_locale(),
        }
        return TemplateResponse(request, "admin/templates_admin/import_translations.html", context)
