"""Django admin for templates: drafts, preview, test send, diff, publish.

Versions are immutable, so "edit" always means "save a new draft" (validated).
Publishing is a separate permission, `templates_admin.publish_templateversion`: an editor
(add/view rights) drafts and previews; only a publisher changes what users receive.
"""

from __future__ import annotations

import difflib
import json
from typing import Any

from django import forms
from django.conf import settings
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import get_object_or_404
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils.html import format_html

from notify.admin_mixins import ReadOnlyAdminMixin
from notify.models import Channel
from templates_admin.models import Template, TemplatePublication, TemplateVersion
from templates_admin.rendering import (
    DIGEST_VARIABLE,
    build_context,
    digest_sample_context,
    render_version,
)
from templates_admin.send_to_me import (
    SendTestRefused,
    SendTestRequest,
    template_version_send_test,
)
from templates_admin.services import (
    TemplateInvalid,
    template_version_draft,
    template_version_problems,
    template_version_publish,
)
from templates_admin.translation_admin import OutdatedFilter, TranslationAdminMixin
from templates_admin.translations import publish_warning
from templates_admin.validation import CHANNEL_FIELDS, FIELD_LABELS

PUBLISH_PERMISSION = "templates_admin.publish_templateversion"
ADD_VERSION_PERMISSION = "templates_admin.add_templateversion"


class VersionForm(forms.Form):
    """The fields of a new draft; only the template's channel's fields are shown."""

    subject = forms.CharField(required=False, max_length=500, label=FIELD_LABELS["subject"])
    html_body = forms.CharField(required=False, widget=forms.Textarea, label="HTML body")
    text_body = forms.CharField(
        required=False,
        widget=forms.Textarea,
        label="Text body",
        help_text="Leave empty to generate it from the HTML body.",
    )
    title = forms.CharField(required=False, max_length=500, label=FIELD_LABELS["title"])
    body = forms.CharField(required=False, widget=forms.Textarea, label=FIELD_LABELS["body"])
    url = forms.CharField(required=False, max_length=2000, label=FIELD_LABELS["url"])

    def __init__(self, *args: Any, template: Template, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.template = template
        used = CHANNEL_FIELDS.get(template.channel, ())
        for name in list(self.fields):
            if name not in used:
                del self.fields[name]

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        fields = {name: data.get(name) or "" for name in self.fields}
        for problem in template_version_problems(template=self.template, fields=fields):
            self.add_error(problem.field if problem.field in self.fields else None, str(problem))
        return data


class PreviewForm(forms.Form):
    locale = forms.CharField(max_length=35, required=False)
    sample = forms.IntegerField(required=False, min_value=1)
    payload = forms.CharField(
        required=False, widget=forms.Textarea(attrs={"rows": 6}), label="Pasted JSON payload"
    )

    def clean_payload(self) -> dict[str, Any] | None:
        text = (self.cleaned_data.get("payload") or "").strip()
        if not text:
            return None
        try:
            value = json.loads(text)
        except json.JSONDecodeError as error:
            raise forms.ValidationError(f"This is not valid JSON: {error}") from error
        if not isinstance(value, dict):
            raise forms.ValidationError("The payload must be a JSON object: {…}.")
        return value


class TemplateVersionInline(ReadOnlyAdminMixin, admin.TabularInline):
    model = TemplateVersion
    extra = 0
    can_delete = False
    deletable = True
    fields = ("number", "created_by", "created_at", "published_at", "actions")
    readonly_fields = fields
    show_change_link = False

    @admin.display(description="")
    def actions(self, version: TemplateVersion) -> str:
        base = "admin:templates_admin_template_"
        links = [
            format_html('<a href="{}">preview</a>', reverse(base + "preview", args=[version.pk])),
        ]
        previous = version.template.versions.filter(number__lt=version.number).first()
        if previous is not None:
            links.append(
                format_html(
                    '<a href="{}">diff with v{}</a>',
                    reverse(base + "diff", args=[previous.pk, version.pk]),
                    previous.number,
                )
            )
        if version.is_published:
            links.append(format_html("<strong>{}</strong>", "published"))
        return format_html(" · ".join(["{}"] * len(links)), *links)


@admin.register(Template)
class TemplateAdmin(TranslationAdminMixin, admin.ModelAdmin):
    list_display = ("category", "channel", "locale", "published", "latest", "outdated")
    list_filter = ("channel", "locale", "category", OutdatedFilter)
    list_select_related = ("category", "published_version")
    readonly_fields = ("published_version",)
    inlines = [TemplateVersionInline]
    change_form_template = "admin/templates_admin/template/change_form.html"

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None):
        # The slot is fixed once created; texts change through new versions only.
        return ("category", "channel", "locale", "published_version") if obj else ()

    def get_fields(self, request: HttpRequest, obj: Any = None):
        return ("category", "channel", "locale") + (("published_version",) if obj else ())

    @admin.display(description="published version")
    def published(self, obj: Template) -> str:
        return f"v{obj.published_version.number}" if obj.published_version else "—"

    @admin.display(description="latest version")
    def latest(self, obj: Template) -> str:
        # Annotated by the mixin's queryset: one statement for the whole list.
        return f"v{obj.latest_number}" if obj.latest_number else "—"

    def response_add(self, request: HttpRequest, obj: Template, post_url_continue=None):
        # A new slot (say a new locale) has no text yet: its author goes on to the first draft.
        if "_addanother" in request.POST or not request.user.has_perm(ADD_VERSION_PERMISSION):
            return super().response_add(request, obj, post_url_continue)
        messages.success(request, f"{obj} added: write its first draft.")
        return HttpResponseRedirect(
            reverse("admin:templates_admin_template_new_version", args=[obj.pk])
        )

    def get_urls(self):
        wrap = self.admin_site.admin_view
        name = "templates_admin_template_"
        return [
            path("<int:pk>/new-version/", wrap(self.new_version_view), name=name + "new_version"),
            path("version/<int:pk>/preview/", wrap(self.preview_view), name=name + "preview"),
            path("version/<int:pk>/publish/", wrap(self.publish_view), name=name + "publish"),
            path("version/<int:pk>/send-test/", wrap(self.send_test_view), name=name + "send_test"),
            path("diff/<int:a>/<int:b>/", wrap(self.diff_view), name=name + "diff"),
            *super().get_urls(),
        ]

    def change_view(self, request, object_id, form_url="", extra_context=None):
        extra_context = dict(extra_context or {})
        template = self.get_object(request, object_id)
        if template is not None:
            extra_context["publications"] = TemplatePublication.objects.filter(
                version__template=template
            ).select_related("version", "published_by")[:20]
        return super().change_view(request, object_id, form_url, extra_context)

    # --- views ---------------------------------------------------------------------------

    def _context(self, request: HttpRequest, **extra: Any) -> dict[str, Any]:
        return {
            **self.admin_site.each_context(request),
            "opts": self.model._meta,
            "can_publish": request.user.has_perm(PUBLISH_PERMISSION),
            **extra,
        }

    def new_version_view(self, request: HttpRequest, pk: int) -> HttpResponse:
        """Edit = a new draft, prefilled from the latest version; saved only when valid."""
        if not request.user.has_perm("templates_admin.add_templateversion"):
            raise PermissionDenied
        template = get_object_or_404(Template.objects.select_related("category"), pk=pk)
        latest = template.versions.first()
        if request.method == "POST":
            form = VersionForm(request.POST, template=template)
            if form.is_valid():
                fields = {name: form.cleaned_data.get(name) or "" for name in form.fields}
                try:
                    version = template_version_draft(
                        template=template, fields=fields, created_by=request.user
                    )
                except TemplateInvalid as error:  # a race with a schema change
                    for problem in error.problems:
                        form.add_error(None, str(problem))
                else:
                    messages.success(request, f"Draft v{version.number} saved.")
                    return HttpResponseRedirect(
                        reverse("admin:templates_admin_template_preview", args=[version.pk])
                    )
        else:
            fields = CHANNEL_FIELDS[template.channel] if latest else ()  # a new slot: empty
            initial = {name: getattr(latest, name) for name in fields}
            form = VersionForm(initial=initial or None, template=template)
        return TemplateResponse(
            request,
            "admin/templates_admin/new_version.html",
            self._context(request, title=f"New draft of {template}", template=template, form=form),
        )

    def _preview(self, version: TemplateVersion, form: PreviewForm) -> dict[str, Any]:
        category = version.template.category
        samples = category.sample_payloads or []
        locale = version.template.locale
        payload: dict[str, Any] = samples[0] if samples else {}
        if form.is_valid():
            locale = form.cleaned_data.get("locale") or locale
            if form.cleaned_data.get("payload") is not None:
                payload = form.cleaned_data["payload"]
            elif form.cleaned_data.get("sample") and form.cleaned_data["sample"] <= len(samples):
                payload = samples[form.cleaned_data["sample"] - 1]
        context = build_context(
            payload,
            recipient={
                "user_id": "preview",
                "locale": locale,
                "timezone": settings.NOTIFY_DEFAULT_TIMEZONE,
            },
        )
        if category.digest_window_for(version.template.channel) is not None:
            # A digest of the samples (or of the pasted payload, as its one event).
            events = samples if form.is_valid() and not form.cleaned_data.get("payload") else []
            context[DIGEST_VARIABLE] = digest_sample_context(events or [payload])
        try:
            rendered = render_version(version, context, locale=locale)
            error = ""
        except Exception as exc:  # show the author what broke instead of a 500
            rendered, error = None, str(exc)
        return {
            "rendered": rendered,
            "render_error": error,
            "locale": locale,
            "samples": samples,
            "payload": payload,
            "payload_json": json.dumps(payload, ensure_ascii=False, indent=2),
        }

    def preview_view(self, request: HttpRequest, pk: int) -> HttpResponse:
        """What each channel will show, for a sample or pasted payload, in any locale."""
        if not self.has_view_permission(request):
            raise PermissionDenied
        version = get_object_or_404(
            TemplateVersion.objects.select_related("template__category"), pk=pk
        )
        form = PreviewForm(request.GET or None)
        preview = self._preview(version, form)
        versions = version.template.versions.all()
        return TemplateResponse(
            request,
            "admin/templates_admin/preview.html",
            self._context(
                request,
                title=f"{version} — preview",
                version=version,
                template=version.template,
                form=form,
                channel=version.template.channel,
                is_push=version.template.channel in (Channel.WEBPUSH, Channel.FCM),
                versions=versions,
                publications=version.publications.select_related("published_by"),
                used_by=version.deliveries.count(),
                **preview,
            ),
        )

    def publish_view(self, request: HttpRequest, pk: int) -> HttpResponse:
        """Publish (or roll back to) a version; publishers only, POST only."""
        if request.method != "POST":
            return HttpResponse(status=405)
        if not request.user.has_perm(PUBLISH_PERMISSION):
            raise PermissionDenied
        version = get_object_or_404(TemplateVersion.objects.select_related("template"), pk=pk)
        template_version_publish(version=version, published_by=request.user)
        messages.success(request, f"{version} is now published.")
        if warning := publish_warning(version=version):
            messages.warning(request, warning)
        return HttpResponseRedirect(
            reverse("admin:templates_admin_template_change", args=[version.template_id])
        )

    def send_test_view(self, request: HttpRequest, pk: int) -> HttpResponse:
        """ "Send test to me" on the version's channel (see `send_to_me`): an email to the
        staff account's own address; the other channels to the recipient linked to it."""
        if request.method != "POST":
            return HttpResponse(status=405)
        # Authors only (editors and publishers), not every reader of the admin.
        if not request.user.has_perm("templates_admin.add_templateversion"):
            raise PermissionDenied
        version = get_object_or_404(
            TemplateVersion.objects.select_related("template__category"), pk=pk
        )
        preview = self._preview(version, PreviewForm(request.POST))
        ask = SendTestRequest(
            version=version, payload=preview["payload"], locale=preview["locale"], user=request.user
        )
        try:
            messages.success(request, template_version_send_test(ask))
        except SendTestRefused as refusal:
            messages.error(request, str(refusal))
        return HttpResponseRedirect(
            reverse("admin:templates_admin_template_preview", args=[version.pk])
        )

    def diff_view(self, request: HttpRequest, a: int, b: int) -> HttpResponse:
        """Side-by-side differences between two versions of the same template."""
        if not self.has_view_permission(request):
            raise PermissionDenied
        left = get_object_or_404(TemplateVersion.objects.select_related("template"), pk=a)
        right = get_object_or_404(TemplateVersion, pk=b, template_id=left.template_id)
        differ = difflib.HtmlDiff(wrapcolumn=70)
        tables = []
        for name in CHANNEL_FIELDS.get(left.template.channel, ()):
            old, new = getattr(left, name), getattr(right, name)
            tables.append(
                {
                    "label": FIELD_LABELS[name],
                    "changed": old != new,
                    "table": differ.make_table(
                        old.splitlines(), new.splitlines(), f"v{left.number}", f"v{right.number}"
                    ),
                }
            )
        return TemplateResponse(
            request,
            "admin/templates_admin/diff.html",
            self._context(
                request,
                title=f"{left.template}: v{left.number} → v{right.number}",
                left=left,
                right=right,
                tables=tables,
                template=left.template,
            ),
        )


@admin.register(TemplatePublication)
class TemplatePublicationAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = ("version", "published_by", "published_at")
    list_filter = ("version__template__channel", "version__template__locale")
    readonly_fields = ("version", "published_by", "published_at")


# Categories' admin with the templates' check, registered in place of the core's.
from templates_admin import category_admin  # noqa: E402, F401
