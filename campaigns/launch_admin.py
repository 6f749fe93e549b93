"""The launch page's estimate: *Estimate* on the add form checks the form, asks
`campaign_estimate` about the campaign it describes (nothing stored, nothing sent) and
shows the form again, filled in, with the estimate above it. Everything shown is escaped
(format_html): names, reasons and the rendered samples are data, not markup."""

from __future__ import annotations

from typing import Any

from django.contrib.admin import helpers
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

from campaigns.estimate import CampaignEstimate, campaign_estimate
from campaigns.models import AudienceKind

ESTIMATE_BUTTON = "_estimate"


def estimate_html(estimate: CampaignEstimate) -> SafeString:
    """The estimate as the launch page shows it: per channel and reason, the duration and
    the rate, and one rendered sample per (locale, channel)."""
    rows = format_html_join(
        "",
        '<tr data-estimate="{}:{}"><td>{}</td><td>{}</td><td class="nt-count">{}</td></tr>',
        (
            (e.channel, outcome, e.channel, outcome, count)
            for e in estimate.channels
            for outcome, count in [
                ("send", e.send),
                ("deferred", e.deferred),
                *sorted(e.suppressed.items()),
            ]
            if count or outcome == "send"
        ),
    )
    samples = format_html_join(
        "",
        '<tr data-sample="{}:{}"><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>',
        (
            (
                s.locale,
                s.channel,
                s.locale,
                s.channel,
                s.template_locale or "—",
                s.problem
                or format_html_join(
                    "", "<div><b>{}</b>: <pre>{}</pre></div>", sorted(s.rendered.items())
                ),
            )
            for s in estimate.samples
        ),
    )
    rate = f"{estimate.rate:g} a second" if estimate.rate is not None else "unpaced"
    return format_html(
        '<div id="campaign-estimate"><h2>Estimate (nothing was launched)</h2>'
        '<p>Audience <b class="nt-audience">{}</b>{} · release {} · about '
        '<b class="nt-duration">{}</b> s</p>'
        "<table><tr><th>Channel</th><th>outcome</th><th></th></tr>{}</table>"
        "<table><tr><th>Locale</th><th>channel</th><th>template</th><th>sample</th></tr>"
        "{}</table></div>",
        estimate.audience,
        ""
        if estimate.decided == estimate.audience
        else f" (counts from an even sample of {estimate.decided}, scaled)",
        rate,
        estimate.duration_seconds,
        rows,
        samples,
    )


class LaunchEstimateMixin:
    """For the campaign ModelAdmin (listed before it): the add form's *Estimate* button."""

    def add_view(
        self, request: HttpRequest, form_url: str = "", extra_context: dict | None = None
    ) -> HttpResponse:
        if request.method == "POST" and ESTIMATE_BUTTON in request.POST:
            return self._estimate_view(request, form_url, extra_context or {})
        return super().add_view(request, form_url, extra_context)

    def _estimate_view(
        self, request: HttpRequest, form_url: str, extra_context: dict[str, Any]
    ) -> HttpResponse:
        if not self.has_add_permission(request):
            raise PermissionDenied
        form = self.get_form(request, None, change=False)(request.POST, request.FILES)
        estimate = None
        if form.is_valid():
            if form.cleaned_data["audience_kind"] == AudienceKind.UPLOAD:
                form.add_error("audience_file", "An uploaded audience is estimated after launch.")
            else:
                estimate = estimate_html(campaign_estimate(campaign=form.save(commit=False)))
        fieldsets = list(self.get_fieldsets(request, None))
        admin_form = helpers.AdminForm(form, fieldsets, {}, (), model_admin=self)
        context = {
            **self.admin_site.each_context(request),
            "title": "Launch campaign",
            "adminform": admin_form,
            "object_id": None,
            "original": None,
            "is_popup": False,
            "to_field": None,
            "media": self.media + admin_form.media,
            "inline_admin_formsets": [],
            "errors": helpers.AdminErrorList(form, []),
            "preserved_filters": self.get_preserved_filters(request),
            "campaign_estimate": estimate,
            **extra_context,
        }
        return self.render_change_form(request, context, add=True, change=False, form_url=form_url)
