"""The chart pages' views: read the store's rollups through the report functions, shape
them with `documents`, render. Each page is for one producer's data (a campaign's
producer, or the producer chosen in the form); `analytics.admin` gates them all behind
`analytics.see_reports`."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

from django import forms
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404
from django.template.response import TemplateResponse
from django.utils import timezone

from analytics.charts.documents import (
    Chart,
    campaign_funnel,
    campaign_sends_chart,
    categories_channels_chart,
    provider_charts,
)
from analytics.models import EventKind
from analytics.store.backend import store_open
from analytics.store.chart_reports import PROVIDER_LATENCIES, campaign_sends, provider_trends
from analytics.store.reports import campaign_report, deliveries_report, store_freshness
from campaigns.models import Campaign
from notify.models import Producer

# The longest window one page covers (days), as the deliveries API: the rollups are per day.
MAX_WINDOW_DAYS = 366
# Without a window asked for, a page shows the last this many days.
DEFAULT_WINDOW_DAYS = 30
# The campaigns the index lists, newest first.
INDEX_CAMPAIGNS = 50
TEMPLATES = "admin/analytics/charts/"
_CATEGORIES = "Categories × channels per day"  # noqa: RUF001 - the multiplication sign is meant
_PROVIDERS = "Providers: latency and failure rate"


class StoreUnavailable(Exception):
    """The analytics store cannot be reached (the analytics process is down)."""


def _read(read: Callable[[Any], Any]) -> Any:
    try:
        return read(store_open())
    except OSError as error:
        raise StoreUnavailable(str(error)) from None


class WindowForm(forms.Form):
    """Which producer's data, over which days (UTC, both included)."""

    producer = forms.ModelChoiceField(Producer.objects.order_by("name"), empty_label=None)
    start = forms.DateField(label="From", widget=forms.DateInput(attrs={"type": "date"}))
    end = forms.DateField(label="To", widget=forms.DateInput(attrs={"type": "date"}))

    def clean(self) -> dict:
        data = super().clean()
        start, end = data.get("start"), data.get("end")
        if start and end:
            if start > end:
                raise forms.ValidationError("“From” must not be after “To”.")
            if (end - start).days >= MAX_WINDOW_DAYS:
                raise forms.ValidationError(f"At most {MAX_WINDOW_DAYS} days at a time.")
        return data


class CategoriesForm(WindowForm):
    kind = forms.ChoiceField(
        label="Count", choices=EventKind.choices, initial=EventKind.DELIVERED.value
    )


# How the providers page names each latency of PROVIDER_LATENCIES.
LATENCY_LABELS = {
    "accepted_to_provider": "accepted → handed to the provider",
    "provider_to_reached": "handed over → reached the person",
}


class ProvidersForm(WindowForm):
    latency = forms.ChoiceField(
        label="Latency",
        choices=[(name, LATENCY_LABELS[name]) for name in PROVIDER_LATENCIES],
        initial="accepted_to_provider",
    )


def _window_form(form_class: type[WindowForm], request: HttpRequest) -> WindowForm:
    """The form bound to the query, or to the defaults (the first producer, the last
    DEFAULT_WINDOW_DAYS days) when nothing was asked."""
    today = timezone.now().date()  # the rollups' days are UTC days
    producer = Producer.objects.order_by("name").first()
    defaults = {
        "producer": producer.pk if producer else "",
        "start": (today - timedelta(days=DEFAULT_WINDOW_DAYS - 1)).isoformat(),
        "end": today.isoformat(),
        **{name: f.initial for name, f in form_class.base_fields.items() if f.initial},
    }
    return form_class({**defaults, **request.GET.dict()})


def _render(
    request: HttpRequest, context: dict, template: str, *, charts: list[Chart], **extra: Any
) -> HttpResponse:
    freshness = store_freshness()
    return TemplateResponse(
        request,
        TEMPLATES + template,
        {**context, "charts": charts, "freshness": freshness, **extra},
        status=503 if extra.get("unavailable") else 200,
    )


def index_page(request: HttpRequest, context: dict) -> HttpResponse:
    """The three pages, and the newest campaigns, each a link to its funnel."""
    campaigns = Campaign.objects.select_related("producer").order_by("-pk")[:INDEX_CAMPAIGNS]
    return TemplateResponse(request, TEMPLATES + "index.html", {**context, "campaigns": campaigns})


def campaign_page(request: HttpRequest, context: dict, campaign_id: int) -> HttpResponse:
    """A campaign's funnel per channel and its sends over time."""
    campaign = get_object_or_404(
        Campaign.objects.select_related("producer", "category"), pk=campaign_id
    )
    scope = {"producer_id": campaign.producer_id, "campaign_id": campaign.pk}
    try:
        channels = _read(lambda store: campaign_report(store=store, **scope))
        sends = _read(lambda store: campaign_sends(store=store, **scope))
    except StoreUnavailable as error:
        return _render(
            request, context, "campaign.html", charts=[], campaign=campaign, unavailable=error
        )
    charts = [campaign_funnel(channels), campaign_sends_chart(sends)]
    return _render(request, context, "campaign.html", charts=charts, campaign=campaign)


def _window_page(
    request: HttpRequest,
    context: dict,
    form_class: type[WindowForm],
    heading: str,
    read: Callable[[Any, dict], Any],
    draw: Callable[[Any, dict], list[Chart]],
) -> HttpResponse:
    """A page over a window of days: the form, then `read` (store, the form's data) and
    `draw` (what was read, the form's data) into its charts; 503 when the store is away."""
    form = _window_form(form_class, request)
    page = {"form": form, "heading": heading}
    if not form.is_valid():
        return _render(request, context, "window.html", charts=[], **page)
    data = form.cleaned_data
    try:
        rows = _read(lambda store: read(store, data))
    except StoreUnavailable as error:
        return _render(request, context, "window.html", charts=[], unavailable=error, **page)
    return _render(request, context, "window.html", charts=draw(rows, data), **page)


def categories_page(request: HttpRequest, context: dict) -> HttpResponse:
    """One event kind per day, by category and channel, for one producer."""
    return _window_page(
        request,
        context,
        CategoriesForm,
        _CATEGORIES,
        read=lambda store, data: deliveries_report(
            store=store,
            producer_id=data["producer"].pk,
            start=data["start"],
            end=data["end"],
            group_by=("day", "category", "channel"),
        ),
        draw=lambda results, data: [
            categories_channels_chart(
                results, kind=data["kind"], start=data["start"], end=data["end"]
            )
        ],
    )


def providers_page(request: HttpRequest, context: dict) -> HttpResponse:
    """Each provider's latency percentiles and every provider's failure rate, per day."""
    return _window_page(
        request,
        context,
        ProvidersForm,
        _PROVIDERS,
        read=lambda store, data: provider_trends(
            store=store,
            producer_id=data["producer"].pk,
            start=data["start"],
            end=data["end"],
            latency=data["latency"],
        ),
        draw=lambda days, data: provider_charts(days, start=data["start"], end=data["end"]),
    )
