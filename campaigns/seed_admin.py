"""Seed lists in admin: editors keep named lists of colleagues' addresses, and those with
`campaigns.send_to_seed_list` send a template draft (from its preview page) or a campaign
that has not started (from its page) to one of them (campaigns.seeds)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django import forms
from django.conf import settings
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import get_object_or_404
from django.template.response import TemplateResponse
from django.urls import path, reverse

from campaigns.models import SEED_LIST_MAX_MEMBERS, Campaign, SeedList
from campaigns.seeds import (
    SEND_PERMISSION,
    SeedSend,
    SeedSendRefused,
    campaign_before_launch,
    campaign_seed_locales,
    campaign_seed_send,
    seed_addresses_clean,
    version_seed_send,
)
from templates_admin.models import TemplateVersion


class AddressesField(forms.CharField):
    """A seed list's addresses, one a line in a text box; a list once cleaned."""

    widget = forms.Textarea(attrs={"rows": 10})

    def prepare_value(self, value: Any) -> Any:
        return "\n".join(value) if isinstance(value, list) else value

    def to_python(self, value: Any) -> list[str]:  # type: ignore[override]
        return seed_addresses_clean(super().to_python(value) or "")


class SeedListForm(forms.ModelForm):
    addresses = AddressesField(
        help_text=f"One email address a line, at most {SEED_LIST_MAX_MEMBERS}.",
    )

    class Meta:
        model = SeedList
        fields = ["name", "addresses"]


class SeedSendForm(forms.Form):
    seed_list = forms.ModelChoiceField(queryset=SeedList.objects.all(), empty_label=None)

    def __init__(self, *args: Any, locales: list[str] | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if locales is not None:  # a campaign: which of its email templates to send
            self.fields["locale"] = forms.ChoiceField(
                choices=[(locale, locale) for locale in locales],
                initial=settings.NOTIFY_DEFAULT_LOCALE,
            )


@admin.register(SeedList)
class SeedListAdmin(admin.ModelAdmin):
    form = SeedListForm
    list_display = ("name", "size", "updated_at")
    search_fields = ("name",)

    @admin.display(description="addresses")
    def size(self, obj: SeedList) -> int:
        return len(obj.addresses)

    def get_urls(self):
        view = self.admin_site.admin_view
        return [
            path(
                "send/version/<int:version_id>/",
                view(self.version_send_view),
                name="campaigns_seedlist_send_version",
            ),
            path(
                "send/campaign/<int:campaign_id>/",
                view(self.campaign_send_view),
                name="campaigns_seedlist_send_campaign",
            ),
            *super().get_urls(),
        ]

    def version_send_view(self, request: HttpRequest, version_id: int) -> HttpResponse:
        """Send a template version (a draft too) to a seed list; back to its preview."""
        _require_send_permission(request, "templates_admin.view_templateversion")
        version = get_object_or_404(
            TemplateVersion.objects.select_related("template__category"), pk=version_id
        )
        back = reverse("admin:templates_admin_template_preview", args=[version.pk])
        return self._send_or_ask(
            request,
            SeedSendForm(request.POST or None),
            send=lambda data: version_seed_send(
                seed_list=data["seed_list"], version=version, requested_by=request.user
            ),
            what=str(version),
            back=back,
        )

    def campaign_send_view(self, request: HttpRequest, campaign_id: int) -> HttpResponse:
        """Send a campaign that has not started to a seed list; back to its page."""
        _require_send_permission(request, "campaigns.view_campaign")
        campaign = get_object_or_404(Campaign.objects.select_related("category"), pk=campaign_id)
        back = reverse("admin:campaigns_campaign_change", args=[campaign.pk])
        locales = campaign_seed_locales(campaign)
        if not locales:
            messages.error(request, f"{campaign.category.key} has no published email template.")
            return HttpResponseRedirect(back)
        return self._send_or_ask(
            request,
            SeedSendForm(request.POST or None, locales=locales),
            send=lambda data: campaign_seed_send(
                seed_list=data["seed_list"],
                campaign=campaign,
                locale=data["locale"],
                requested_by=request.user,
            ),
            what=f"campaign {campaign}",
            back=back,
        )

    def _send_or_ask(
        self,
        request: HttpRequest,
        form: SeedSendForm,
        *,
        send: Callable[[dict[str, Any]], SeedSend],
        what: str,
        back: str,
    ) -> HttpResponse:
        """A valid POST sends and goes `back`, saying what was done; otherwise the page
        that asks which seed list (and locale)."""
        if request.method == "POST" and form.is_valid():
            _sent(request, lambda: send(form.cleaned_data))
            return HttpResponseRedirect(back)
        return TemplateResponse(
            request,
            "admin/campaigns/seedlist/send.html",
            {
                **self.admin_site.each_context(request),
                "opts": self.model._meta,
                "title": f"Send {what} to a seed list",
                "form": form,
                "back": back,
            },
        )


def seed_send_campaign_url(request: HttpRequest, campaign: Campaign | None) -> str:
    """The campaign page's "Send to seed list…" link: only before the campaign starts, and
    only for those with the permission ("" otherwise: no button)."""
    if campaign is None or not request.user.has_perms([SEND_PERMISSION, "campaigns.view_campaign"]):
        return ""
    if not campaign_before_launch(campaign):
        return ""
    return reverse("admin:campaigns_seedlist_send_campaign", args=[campaign.pk])


def _require_send_permission(request: HttpRequest, see: str) -> None:
    """The seed-send permission, and the right to see what is sent (`see`)."""
    if not request.user.has_perms([SEND_PERMISSION, see]):
        raise PermissionDenied


def _sent(request: HttpRequest, send: Callable[[], SeedSend]) -> None:
    """Run the send and tell the staff member what it did."""
    try:
        result = send()
    except SeedSendRefused as refusal:
        messages.error(request, str(refusal))
        return
    level = messages.WARNING if result.refused else messages.SUCCESS
    messages.add_message(request, level, result.summary())
