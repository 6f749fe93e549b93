"""The launch page's estimate: *Estimate* on the add form checks the form, asks
`campaign_estimate` about the campaign it describes (nothing launched, nothing sent) and
shows the form again, filled in, with the estimate above it. Everything shown is escaped
(format_html): names, reasons and the rendered samples are data, not markup.

An uploaded audience is staged first (campaigns/upload.py: read and bounded as a launch
reads it): the estimate runs over the staged rows, the page carries the staging's token
in a hidden field, and *Save* launches exactly those rows unless another file is chosen."""

from __future__ import annotations

from typing import Any

from django.contrib.admin import helpers
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString, mark_safe

from campaigns.estimate import CampaignEstimate, campaign_estimate
from campaigns.models import AudienceKind, StagedUpload
from campaigns.upload import UploadProblem, upload_stage

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
                ("digested", e.digested),
                ("delayed", e.delayed),
                ("expired", e.expired),
                *sorted(e.suppressed.items()),
            ]
            if count or outcome == "send"
        ),
    )
    expiring = format_html_join(
        "",
        '<p class="nt-expiring" data-expiring="{}">{}: would expire, e.g. {}</p>',
        (
            (e.channel, e.channel, ", ".join(e.expired_examples))
            for e in estimate.channels
            if e.expired_examples
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
        "<table><tr><th>Channel</th><th>outcome</th><th></th></tr>{}</table>{}"
        "<table><tr><th>Locale</th><th>channel</th><th>template</th><th>sample</th></tr>"
        "{}</table></div>",
        estimate.audience,
        ""
        if estimate.decided == estimate.audience
        else f" (counts from an even sample of {estimate.decided}, scaled)",
        rate,
        estimate.duration_seconds,
        rows,
        expiring,
        samples,
    )


def staged_html(staged: StagedUpload | None) -> SafeString:
    """What the estimate of an uploaded audience was made over, and that the launch
    takes exactly that ("" for other audiences)."""
    if staged is None:
        return mark_safe("")
    return format_html(
        '<p id="campaign-staged" data-staged="{}">Estimated over <b>{}</b> distinct user ids '
        "of {} ({} name nobody), staged: <b>Save</b> launches exactly these; choose a file "
        "only to replace them.</p>",
        staged.pk,
        staged.uploaded_count,
        staged.file_name or "the file",
        staged.unknown_count,
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
            probe = form.save(commit=False)
            staged = None
            if probe.audience_kind == AudienceKind.UPLOAD:
                staged = self._staged(request, form)
                probe.audience_spec = {"staged_upload": str(staged.pk)} if staged else {}
            if staged is not None or probe.audience_kind != AudienceKind.UPLOAD:
                estimate = format_html(
                    "{}{}", staged_html(staged), estimate_html(campaign_estimate(campaign=probe))
                )
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

    def _staged(self, request: HttpRequest, form: Any) -> StagedUpload | None:
        """The staged upload to estimate: the file chosen now, staged (the page then
        carries its token), or the one the page already carries; None with the form's
        error when the file cannot be an audience."""
        upload = form.cleaned_data["audience_file"]
        if upload is None:
            return form.cleaned_data["staged"]
        try:
            staged = upload_stage(upload, staged_by=request.user, file_name=upload.name or "")
        except UploadProblem as problem:  # the form checked it; a second read agrees
            form.add_error("audience_file", str(problem))
            return None
        form.data = form.data.copy()
        form.data[form.add_prefix("staged_upload")] = str(staged.pk)
        return staged
