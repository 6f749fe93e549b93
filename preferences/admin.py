"""Admin: preferences and consent history, read-only, and one form for support.

A preference changes through the API, the unsubscribe link or support's "Record consent
taken by support" form; each writes the consent record in the same transaction through
preferences.services. No admin edit form could, so every other change is refused.
"""

from __future__ import annotations

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import path, reverse

from notify.admin_mixins import ReadOnlyAdminMixin
from notify.models import Category, Channel, Recipient
from preferences.models import (
    ConsentRecord,
    MarketingDayCount,
    Preference,
    PreferenceCenterLinks,
    QuietHours,
    SettingChange,
)
from preferences.services import consent_by_support_record

CONSENT_FIELDS = (
    "created_at",
    "category",
    "channel",
    "granted",
    "source",
    "agent",
    "reason",
    "text_version",
    "ip_address",
    "user_agent",
)
RECORD_BY_SUPPORT = "preferences.record_consent_by_support"


class SupportConsentForm(forms.Form):
    """What the person told support: who, which category and channel, yes or no, and why."""

    user_id = forms.CharField(max_length=255, label="Recipient's user id")
    category = forms.ModelChoiceField(
        queryset=Category.objects.filter(mandatory=False).order_by("key"),
        required=False,
        empty_label="All marketing",
        help_text="Mandatory categories (login codes, payments) ignore consent.",
    )
    channel = forms.ChoiceField(choices=[("", "Every channel"), *Channel.choices], required=False)
    decision = forms.ChoiceField(
        choices=[("withdrawn", "Withdrawn"), ("granted", "Granted")], widget=forms.RadioSelect
    )
    reason = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 3}),
        help_text='What the person asked for, e.g. "called to stop promotional SMS". '
        "No contact details: the history is kept after erasure.",
    )

    def clean_user_id(self) -> Recipient:
        recipient = Recipient.objects.filter(user_id=self.cleaned_data["user_id"].strip()).first()
        if recipient is None:
            raise forms.ValidationError("No recipient has this user id.")
        return recipient


class ConsentRecordInline(ReadOnlyAdminMixin, admin.TabularInline):
    model = ConsentRecord
    fields = CONSENT_FIELDS
    readonly_fields = CONSENT_FIELDS
    ordering = ("id",)
    extra = 0


class PreferenceInline(ReadOnlyAdminMixin, admin.TabularInline):
    """The recipient's changed cells (no row = the category default)."""

    model = Preference
    fields = ("category", "channel", "enabled", "source", "updated_at")
    readonly_fields = fields
    extra = 0


class QuietHoursInline(admin.StackedInline):
    model = QuietHours
    extra = 0
    max_num = 1


@admin.register(ConsentRecord)
class ConsentRecordAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = ("recipient", "category", "channel", "granted", "source", "agent", "created_at")
    list_filter = ("source", "granted")
    search_fields = ("recipient__user_id",)
    list_select_related = ("recipient", "category", "agent")
    readonly_fields = ("recipient", *CONSENT_FIELDS)
    change_list_template = "admin/preferences/consentrecord/change_list.html"

    def get_urls(self):
        record = self.admin_site.admin_view(self.record_by_support_view)
        own = [path("record/", record, name="preferences_consentrecord_record")]
        return own + super().get_urls()

    def changelist_view(self, request, extra_context=None):
        extra_context = extra_context or {}
        extra_context["can_record_by_support"] = request.user.has_perm(RECORD_BY_SUPPORT)
        return super().changelist_view(request, extra_context)

    def record_by_support_view(self, request: HttpRequest) -> HttpResponse:
        """Record a grant or withdrawal the person gave support; only with its permission."""
        if not request.user.has_perm(RECORD_BY_SUPPORT):
            raise PermissionDenied
        initial = {"user_id": request.GET.get("user_id", "")}
        form = SupportConsentForm(request.POST or None, initial=initial)
        if request.method == "POST" and form.is_valid():
            data = form.cleaned_data
            recipient = data["user_id"]
            record = consent_by_support_record(
                recipient=recipient,
                category=data["category"],
                channel=data["channel"],
                granted=data["decision"] == "granted",
                agent=request.user,
                reason=data["reason"],
            )
            self.log_addition(request, record, [{"added": {}}])
            self.message_user(request, f"Recorded: {record}.", messages.SUCCESS)
            return HttpResponseRedirect(
                reverse("admin:notify_recipient_change", args=[recipient.pk]) + "#consents-group"
            )
        context = {
            **self.admin_site.each_context(request),
            "title": "Record consent taken by support",
            "form": form,
            "opts": self.model._meta,
        }
        return TemplateResponse(
            request, "admin/preferences/consentrecord/record_by_support.html", context
        )


@admin.register(Preference)
class PreferenceAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    """Read-only: a change must go through the API so its consent record is written."""

    list_display = ("recipient", "category", "channel", "enabled", "source", "updated_at")
    search_fields = ("recipient__user_id",)
    list_filter = ("enabled", "channel")


@admin.register(MarketingDayCount)
class MarketingDayCountAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = ("recipient", "local_date", "count")
    search_fields = ("recipient__user_id",)


@admin.register(SettingChange)
class SettingChangeAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    """Changes of quiet hours, time zone and language, as they were made (append-only)."""

    list_display = ("recipient", "setting", "value", "source", "created_at")
    search_fields = ("recipient__user_id",)
    list_filter = ("setting", "source")
    list_select_related = ("recipient",)


@admin.register(PreferenceCenterLinks)
class PreferenceCenterLinksAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    """Whose preference-center links were switched off, and from when (links minted
    before `valid_after` are refused)."""

    list_display = ("recipient", "valid_after")
    search_fields = ("recipient__user_id",)
    list_select_related = ("recipient",)
