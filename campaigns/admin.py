"""Campaigns in admin: launch (with `launch_campaign`), progress, pause, resume, cancel."""

from __future__ import annotations

from django import forms
from django.contrib import admin, messages
from django.utils.html import format_html, format_html_join

from campaigns.audience import audience_problem
from campaigns.control import (
    CampaignStateError,
    campaign_cancel,
    campaign_pause,
    campaign_resume,
)
from campaigns.fanout import campaign_launch
from campaigns.models import AudienceKind, Campaign
from campaigns.selectors import campaign_progress
from notify.payloads import payload_problem

LAUNCH_FIELDS = ("name", "category", "payload", "audience_kind", "audience_spec", "send_at")
# A launched campaign shows its audience as a summary (a user-id list may be 100,000 long).
SHOWN_FIELDS = ("name", "category", "payload", "audience", "send_at", "status", "producer",
                "launched_by", "launched_at", "audience_size", "created_count", "checkpoint",
                "fanned_out_at", "progress")  # fmt: skip


class CampaignLaunchForm(forms.ModelForm):
    class Meta:
        model = Campaign
        fields = LAUNCH_FIELDS

    def clean(self) -> dict:
        data = super().clean()
        category = data.get("category")
        if category is not None:
            problem = payload_problem(category.payload_schema, data.get("payload") or {})
            if problem is not None:
                self.add_error("payload", f"{problem.field}: {problem.message}")
        kind = data.get("audience_kind")
        if kind:
            problem = audience_problem(kind, data.get("audience_spec") or {})
            if problem is not None:
                self.add_error("audience_spec", f"{problem.field}: {problem.message}")
        return data


@admin.register(Campaign)
class CampaignAdmin(admin.ModelAdmin):
    list_display = ("id", "name", "category", "status", "audience_size", "created_count",
                    "send_at", "launched_at", "launched_by")  # fmt: skip
    list_filter = ("status", "category")
    search_fields = ("name",)
    list_select_related = ("category", "launched_by")
    actions = ["pause", "resume", "cancel"]

    def get_form(self, request, obj=None, change=False, **kwargs):
        if obj is None:
            kwargs["form"] = CampaignLaunchForm
        return super().get_form(request, obj, change=change, **kwargs)

    def get_fields(self, request, obj=None):
        if obj is None:
            return LAUNCH_FIELDS
        return SHOWN_FIELDS

    def get_readonly_fields(self, request, obj=None):
        # A launched campaign changes only through its actions.
        return () if obj is None else self.get_fields(request, obj)

    def has_add_permission(self, request) -> bool:
        return request.user.has_perm("campaigns.launch_campaign")

    def has_control_permission(self, request) -> bool:
        return request.user.has_perm("campaigns.change_campaign")

    def has_delete_permission(self, request, obj=None) -> bool:
        return False  # the notifications it made stay; so does the record of them

    def save_model(self, request, obj, form, change) -> None:
        if change:
            return  # everything is read-only once launched
        launched = campaign_launch(
            name=obj.name,
            category=obj.category,
            payload=obj.payload,
            audience_kind=obj.audience_kind,
            audience_spec=obj.audience_spec if obj.audience_kind != AudienceKind.ALL else {},
            send_at=obj.send_at,
            launched_by=request.user,
        )
        obj.pk = launched.pk  # the admin redirects to it

    @admin.display(description="Audience")
    def audience(self, obj: Campaign) -> str:
        spec = obj.audience_spec or {}
        if obj.audience_kind == AudienceKind.USER_IDS:
            return f"{len(spec.get('user_ids', []))} user ids"
        if obj.audience_kind == AudienceKind.SEGMENT:
            return ", ".join(f"{name}={value}" for name, value in sorted(spec.items()))
        return obj.get_audience_kind_display()

    @admin.display(description="Progress")
    def progress(self, obj: Campaign) -> str:
        progress = campaign_progress(obj)
        members = format_html_join(
            "", "<tr><td>{}</td><td>{}</td></tr>", sorted(progress.members.items())
        )
        deliveries = format_html_join(
            "",
            "<tr><td>{}</td><td>{}</td><td>{}</td></tr>",
            ((status, reason or "—", count) for status, reason, count in progress.deliveries),
        )
        return format_html(
            "<p>Audience {} · created {}</p>"
            "<table><tr><th>Members by status</th><th></th></tr>{}</table>"
            "<table><tr><th>Deliveries: status</th><th>reason</th><th></th></tr>{}</table>",
            progress.audience_size,
            progress.created,
            members,
            deliveries,
        )

    def _apply(self, request, queryset, action, done: str) -> None:
        changed = 0
        for campaign_id in queryset.values_list("pk", flat=True):
            try:
                action(campaign_id=campaign_id)
                changed += 1
            except CampaignStateError as error:
                self.message_user(request, f"Campaign {campaign_id}: {error}", messages.WARNING)
        if changed:
            self.message_user(request, f"{done}: {changed}.", messages.SUCCESS)

    @admin.action(description="Pause (hold what is not sent yet)", permissions=["control"])
    def pause(self, request, queryset) -> None:
        self._apply(request, queryset, campaign_pause, "Paused")

    @admin.action(description="Resume", permissions=["control"])
    def resume(self, request, queryset) -> None:
        self._apply(request, queryset, campaign_resume, "Resumed")

    @admin.action(description="Cancel (end what is not sent yet)", permissions=["control"])
    def cancel(self, request, queryset) -> None:
        self._apply(request, queryset, campaign_cancel, "Cancelled")
