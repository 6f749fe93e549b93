"""Status webhooks out in admin: endpoints (why one was disabled, every attempt,
re-enabling), their events and attempts, and re-delivering failed events."""

from __future__ import annotations

from django import forms
from django.conf import settings
from django.contrib import admin, messages
from django.urls import reverse
from django.utils.html import format_html, format_html_join

from deliveries.support.devices import fingerprint
from egress.origins import EndpointRefused
from webhooks.endpoints import endpoint_enable, endpoint_url_check
from webhooks.models import (
    WebhookAttempt,
    WebhookEndpoint,
    WebhookEvent,
    WebhookEventStatus,
    WebhookSubscription,
)
from webhooks.redelivery import EndpointDisabled, failed_events_redeliver
from webhooks.signing import secret_new


class WebhookSubscriptionInline(admin.TabularInline):
    model = WebhookSubscription
    fields = ("event_type",)
    extra = 0


class WebhookEndpointForm(forms.ModelForm):
    url = forms.URLField(max_length=1024, assume_scheme="https")

    class Meta:
        model = WebhookEndpoint
        fields = ("producer", "url", "description", "active")

    def clean_url(self) -> str:
        url = self.cleaned_data["url"]
        try:
            endpoint_url_check(url)
        except EndpointRefused as refused:
            raise forms.ValidationError(f"This URL {refused.reason}.") from None
        return url


@admin.register(WebhookEndpoint)
class WebhookEndpointAdmin(admin.ModelAdmin):
    """A producer's status webhook endpoints: why one was disabled, every attempt, and
    re-enabling it (what waited is posted then). Its secrets show only as fingerprints:
    the producer gets one from the API (`rotate-secret` for an endpoint added here)."""

    list_display = (
        "id",
        "producer",
        "url",
        "active",
        "disabled_reason",
        "failures_in_row",
        "updated_at",
    )
    list_filter = ("active",)
    search_fields = ("url", "producer__name")
    list_select_related = ("producer",)
    readonly_fields = (
        "secret_fingerprint",
        "previous_secret_fingerprint",
        "previous_secret_until",
        "disabled_reason",
        "disabled_at",
        "failing_since",
        "failures_in_row",
        "recent_attempts",
        "created_at",
        "updated_at",
    )
    exclude = ("secret", "previous_secret")
    inlines = [WebhookSubscriptionInline]
    actions = ["enable", "redeliver"]

    form = WebhookEndpointForm

    def save_model(self, request, obj, form, change) -> None:
        if not change:
            obj.secret = secret_new()
        super().save_model(request, obj, form, change)

    def save_formset(self, request, form, formset, change) -> None:
        for item in formset.save(commit=False):
            if isinstance(item, WebhookSubscription):
                item.producer_id = form.instance.producer_id
            item.save()
        for gone in formset.deleted_objects:
            gone.delete()

    @admin.display(description="Secret fingerprint")
    def secret_fingerprint(self, endpoint: WebhookEndpoint) -> str:
        return fingerprint(endpoint.secret)

    @admin.display(description="Previous secret fingerprint")
    def previous_secret_fingerprint(self, endpoint: WebhookEndpoint) -> str:
        return fingerprint(endpoint.previous_secret)

    @admin.display(description="Recent attempts")
    def recent_attempts(self, endpoint: WebhookEndpoint) -> str:
        """The latest posts (every one is in Webhook attempts, linked below)."""
        if endpoint.pk is None:
            return "-"
        rows = endpoint.attempts.select_related("event").order_by("-started_at")[
            : settings.NOTIFY_WEBHOOK_ADMIN_ATTEMPTS
        ]
        table = format_html_join(
            "",
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{} ms</td><td>{}</td></tr>",
            (
                (
                    a.started_at,
                    a.event.msg_id,
                    "ok" if a.ok else "failed",
                    a.status_code,
                    a.duration_ms,
                    a.response[:200],
                )
                for a in rows
            ),
        )
        every = reverse("admin:webhooks_webhookattempt_changelist")
        return format_html(
            '<table>{}</table><a href="{}?endpoint__id__exact={}">Every attempt</a>',
            table,
            every,
            endpoint.pk,
        )

    @admin.action(description="Re-enable (post what waited)", permissions=["change"])
    def enable(self, request, queryset) -> None:
        requeued = sum(endpoint_enable(endpoint=endpoint) for endpoint in queryset)
        self.message_user(
            request, f"{queryset.count()} endpoint(s) enabled; {requeued} event(s) re-queued."
        )

    @admin.action(description="Re-deliver failed events (retries spent)", permissions=["change"])
    def redeliver(self, request, queryset) -> None:
        for endpoint in queryset:
            _redeliver(self, request, endpoint)


def _redeliver(model_admin, request, endpoint: WebhookEndpoint, msg_ids=None) -> None:
    """Re-deliver an endpoint's failed events (those of `msg_ids` only, when given) and
    say how many were queued."""
    try:
        done = failed_events_redeliver(endpoint=endpoint, msg_ids=msg_ids)
    except EndpointDisabled:
        model_admin.message_user(
            request, f"{endpoint}: disabled; re-enable it first.", level=messages.ERROR
        )
        return
    more = " More are left: run it again." if done.more else ""
    model_admin.message_user(request, f"{endpoint}: {done.queued} failed event(s) queued.{more}")


@admin.register(WebhookEvent)
class WebhookEventAdmin(admin.ModelAdmin):
    list_display = (
        "msg_id",
        "endpoint",
        "event_type",
        "sequence",
        "status",
        "attempts",
        "next_attempt_at",
        "last_error",
        "created_at",
    )
    list_filter = ("status", "event_type")
    search_fields = ("=msg_id", "=endpoint__id", "=notification_id")
    list_select_related = ("endpoint",)
    readonly_fields = [f.name for f in WebhookEvent._meta.fields]
    actions = ["redeliver"]

    def has_add_permission(self, request) -> bool:
        return False

    @admin.action(description="Re-deliver the selected failed events", permissions=["change"])
    def redeliver(self, request, queryset) -> None:
        by_endpoint: dict[int, list[str]] = {}
        failed = queryset.filter(status=WebhookEventStatus.FAILED)
        for endpoint_id, msg_id in failed.values_list("endpoint_id", "msg_id"):
            by_endpoint.setdefault(endpoint_id, []).append(msg_id)
        if not by_endpoint:
            self.message_user(request, "None of them failed.", level=messages.WARNING)
        for endpoint in WebhookEndpoint.objects.filter(pk__in=by_endpoint):
            _redeliver(self, request, endpoint, msg_ids=by_endpoint[endpoint.pk])


@admin.register(WebhookAttempt)
class WebhookAttemptAdmin(admin.ModelAdmin):
    list_display = ("started_at", "endpoint", "event", "number", "ok", "status_code", "duration_ms")
    list_filter = ("ok", "endpoint")
    search_fields = ("=endpoint__id", "=event__msg_id")
    list_select_related = ("endpoint", "event")
    readonly_fields = [f.name for f in WebhookAttempt._meta.fields]

    def has_add_permission(self, request) -> bool:
        return False
