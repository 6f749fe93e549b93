"""Campaigns in admin: launch (with `launch_campaign`), progress, pause, resume, cancel,
"Send to seed list…" before one starts (seed_admin.py); and support's recipient page,
where deleting a person is erasing them."""

from __future__ import annotations

from django import forms
from django.conf import settings
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect, StreamingHttpResponse
from django.shortcuts import get_object_or_404
from django.urls import path, reverse
from django.utils.html import format_html, format_html_join
from django.views.decorators.http import require_POST

from campaigns.audience import audience_problem
from campaigns.control import (
    CampaignStateError,
    campaign_cancel,
    campaign_pause,
    campaign_resume,
)
from campaigns.erasure import person_erase
from campaigns.fanout import campaign_launch
from campaigns.launch_admin import LaunchEstimateMixin
from campaigns.models import AudienceKind, Campaign
from campaigns.seed_admin import seed_send_campaign_url  # also registers seed lists
from campaigns.selectors import campaign_progress
from campaigns.upload import (
    audience_staged_load,
    audience_upload_load,
    staged_upload_find,
    unknown_user_ids,
    upload_problem,
)
from deliveries.support.pages import SupportRecipientAdmin
from notify.models import ErasureVia, Recipient
from notify.payloads import payload_problem

LAUNCH_FIELDS = (
    "name",
    "category",
    "payload",
    "audience_kind",
    "audience_spec",
    "audience_file",
    "staged_upload",
    "send_at",
    "send_rate",
    "local_time",
)
# Form fields that are not the campaign's: the file, and the file staged by *Estimate*.
FILE_FIELDS = ("audience_file", "staged_upload")
# A launched campaign shows its audience as a summary (a user-id list may be 100,000 long).
SHOWN_FIELDS = (
    "name",
    "category",
    "payload",
    "audience",
    "send_at",
    "send_rate",
    "local_time",
    "status",
    "producer",
    "launched_by",
    "launched_at",
    "audience_size",
    "created_count",
    "checkpoint",
    "fanned_out_at",
    "progress",
)
# While a campaign can still change, its page refreshes the progress this often (ms).
CONTROLS = {"pause": campaign_pause, "resume": campaign_resume, "cancel": campaign_cancel}
CONTROL_DONE = {"pause": "Paused", "resume": "Resumed", "cancel": "Cancelled"}


class CampaignLaunchForm(forms.ModelForm):
    audience_file = forms.FileField(
        required=False,
        label="Audience file",
        help_text="For an uploaded audience: a CSV with one user id per line (an optional "
        "`user_id` header). Ids that name nobody are counted and listed, not refused. "
        "*Estimate* stages the file: the launch then takes exactly the rows estimated.",
    )
    # The file *Estimate* staged (campaigns/upload.py), carried by the page it answers.
    staged_upload = forms.UUIDField(required=False, widget=forms.HiddenInput)
    staff_user = None  # set per request by CampaignAdmin.get_form: who may use a staging

    class Meta:
        model = Campaign
        fields = [name for name in LAUNCH_FIELDS if name not in FILE_FIELDS]

    def clean(self) -> dict:
        data = super().clean()
        upload = data.get("audience_file")
        data["staged"] = None
        if data.get("audience_kind") == AudienceKind.UPLOAD:
            self._upload_clean(data)
        elif upload is not None:
            self.add_error("audience_file", "A file is only read for an uploaded audience.")
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

    def _upload_clean(self, data: dict) -> None:
        """A file chosen now is checked (and replaces any staged one); else the staged
        upload named must be this staff member's and still kept."""
        upload = data.get("audience_file")
        if upload is not None:
            problem = upload_problem(upload)
        elif data.get("staged_upload") is not None:
            data["staged"] = staged_upload_find(
                staged_id=data["staged_upload"], staged_by=self.staff_user
            )
            problem = (
                None
                if data["staged"] is not None
                else "The estimated file is no longer staged (launched, over a day old, or "
                "staged by someone else): choose it again."
            )
        else:
            problem = "Choose a CSV file of user ids."
        if problem is not None:
            self.add_error("audience_file", problem)


@admin.register(Campaign)
class CampaignAdmin(LaunchEstimateMixin, admin.ModelAdmin):
    list_display = (
        "id",
        "name",
        "category",
        "status",
        "audience_size",
        "created_count",
        "send_at",
        "launched_at",
        "launched_by",
    )
    list_filter = ("status", "category")
    search_fields = ("name",)
    list_select_related = ("category", "launched_by")
    actions = ["pause", "resume", "cancel"]

    def get_form(self, request, obj=None, change=False, **kwargs):
        if obj is None:  # the launch form, knowing whose staged uploads it may take
            kwargs["form"] = type(
                "CampaignLaunchForm", (CampaignLaunchForm,), {"staff_user": request.user}
            )
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
            send_rate=obj.send_rate,
            local_time=obj.local_time,
        )
        if launched.audience_kind == AudienceKind.UPLOAD:
            # In the admin's transaction: the fan-out is published only after commit.
            if form.cleaned_data["audience_file"] is not None:
                audience_upload_load(launched, form.cleaned_data["audience_file"])
            else:  # exactly the rows its estimate was made over
                audience_staged_load(launched, form.cleaned_data["staged"])
        obj.pk = launched.pk  # the admin redirects to it

    def response_add(self, request, obj, post_url_continue=None):
        # After a launch, marketing watches it: its page, with live progress and controls.
        return HttpResponseRedirect(reverse("admin:campaigns_campaign_change", args=[obj.pk]))

    def get_urls(self):
        view = self.admin_site.admin_view
        return [
            path(
                "<int:campaign_id>/progress/",
                view(self.progress_view),
                name="campaigns_campaign_progress",
            ),
            path(
                "<int:campaign_id>/control/<str:action>/",
                view(self.control_view),
                name="campaigns_campaign_control",
            ),
            path(
                "<int:campaign_id>/unknown-ids.csv",
                view(self.unknown_ids_view),
                name="campaigns_campaign_unknown_ids",
            ),
            *super().get_urls(),
        ]

    def change_view(self, request, object_id, form_url="", extra_context=None):
        extra_context = {
            **(extra_context or {}),
            "controls": list(CONTROLS) if self.has_control_permission(request) else [],
            "progress_poll_ms": int(settings.NOTIFY_CAMPAIGN_PROGRESS_POLL * 1000),
            "seed_send_url": seed_send_campaign_url(request, self.get_object(request, object_id)),
        }
        return super().change_view(request, object_id, form_url, extra_context)

    def progress_view(self, request: HttpRequest, campaign_id: int) -> HttpResponse:
        """The progress block alone, for the page's live refresh."""
        if not self.has_view_permission(request):
            raise PermissionDenied
        return HttpResponse(self.progress(get_object_or_404(Campaign, pk=campaign_id)))

    def control_view(self, request: HttpRequest, campaign_id: int, action: str) -> HttpResponse:
        """Pause, resume or cancel from the campaign's page (POST), then back to it."""
        return require_POST(self._control)(request, campaign_id, action)

    def _control(self, request: HttpRequest, campaign_id: int, action: str) -> HttpResponse:
        if action not in CONTROLS or not self.has_control_permission(request):
            raise PermissionDenied
        self._apply(
            request, Campaign.objects.filter(pk=campaign_id), CONTROLS[action], CONTROL_DONE[action]
        )
        return HttpResponseRedirect(reverse("admin:campaigns_campaign_change", args=[campaign_id]))

    def unknown_ids_view(self, request: HttpRequest, campaign_id: int) -> HttpResponse:
        """The uploaded ids that name nobody, as a CSV, streamed."""
        if not self.has_view_permission(request):
            raise PermissionDenied
        campaign = get_object_or_404(Campaign, pk=campaign_id)
        response = StreamingHttpResponse(
            (f"{user_id}\n" for user_id in unknown_user_ids(campaign)), content_type="text/csv"
        )
        response["Content-Disposition"] = (
            f'attachment; filename="campaign-{campaign.pk}-unknown.csv"'
        )
        return response

    @admin.display(description="Audience")
    def audience(self, obj: Campaign) -> str:
        spec = obj.audience_spec or {}
        if obj.audience_kind == AudienceKind.USER_IDS:
            return f"{len(spec.get('user_ids', []))} user ids"
        if obj.audience_kind == AudienceKind.SEGMENT:
            return ", ".join(f"{name}={value}" for name, value in sorted(spec.items()))
        if obj.audience_kind == AudienceKind.UPLOAD and obj.uploaded_count is not None:
            if not obj.unknown_count:
                return f"{obj.uploaded_count} uploaded user ids, all known"
            url = reverse("admin:campaigns_campaign_unknown_ids", args=[obj.pk])
            return format_html(
                '{} uploaded user ids; {} name nobody (<a href="{}">list</a>)',
                obj.uploaded_count,
                obj.unknown_count,
                url,
            )
        return obj.get_audience_kind_display()

    @admin.display(description="Progress")
    def progress(self, obj: Campaign) -> str:
        progress = campaign_progress(obj)
        members = format_html_join(
            "",
            '<tr data-member="{}"><td>{}</td><td class="nt-count">{}</td></tr>',
            ((status, status, count) for status, count in sorted(progress.members.items())),
        )
        deliveries = format_html_join(
            "",
            '<tr data-delivery="{}"><td>{}</td><td>{}</td><td class="nt-count">{}</td></tr>',
            (
                (status, status, reason or "—", count)
                for status, reason, count in progress.deliveries
            ),
        )
        email = format_html_join(
            "",
            '<tr data-email="{}"><td>{}</td><td class="nt-count">{}</td></tr>',
            (
                (name, name, count)
                for name, count in [
                    *progress.email.items(),
                    *((f"via {p}", n) for p, n in progress.providers.items()),
                ]
            ),
        )
        return format_html(
            '<div id="campaign-progress" data-status="{}"><p>Status <b class="nt-status">{}</b>'
            ' · audience <b>{}</b> · created <b class="nt-created">{}</b></p>'
            "<table><tr><th>Members by status</th><th></th></tr>{}</table>"
            "<table><tr><th>Deliveries: status</th><th>reason</th><th></th></tr>{}</table>"
            "<table><tr><th>Email, as the provider reports it</th><th></th></tr>{}</table>"
            "</div>",
            obj.status,
            obj.get_status_display(),
            progress.audience_size,
            progress.created,
            members,
            deliveries,
            email,
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


@admin.register(Recipient)
class ErasableRecipientAdmin(SupportRecipientAdmin):
    """Support's recipient page. Deleting a person here (one, or several selected) erases
    them (campaigns.erasure): a plain delete would cascade away the consent history and
    leave their Redis keys behind. Both need the `erase_recipient` permission."""

    actions = ["erase"]

    def has_erase_permission(self, request) -> bool:
        return request.user.has_perm("notify.erase_recipient")

    def has_delete_permission(self, request, obj=None) -> bool:
        return self.has_erase_permission(request)

    @admin.action(
        description="Erase (personal data everywhere; consent kept under a hash)",
        permissions=["erase"],
    )
    def erase(self, request, queryset) -> None:
        erased = self._erase(request, queryset)
        self.message_user(request, f"Erased: {erased}.", messages.SUCCESS)

    def get_deleted_objects(self, objs, request):
        # The confirmation lists the people only: their rows are erased, not cascaded,
        # and their consent records are kept (Django's list would show them going).
        names = [str(obj) for obj in objs]
        perms_needed = set() if self.has_erase_permission(request) else {"recipient (erase)"}
        return names, {"recipients (erased)": len(names)}, perms_needed, []

    def log_deletions(self, request, queryset):
        return []  # the erasure ledger records it; an admin log entry would keep the user id

    def delete_model(self, request, obj) -> None:
        self._erase(request, [obj])

    def delete_queryset(self, request, queryset) -> None:
        self._erase(request, queryset)

    def _erase(self, request, recipients) -> int:
        user_ids = [recipient.user_id for recipient in recipients]
        for user_id in user_ids:
            person_erase(
                user_id=user_id,
                via=ErasureVia.ADMIN,
                requested_by=f"admin {request.user.get_username()}",
            )
        return len(user_ids)
