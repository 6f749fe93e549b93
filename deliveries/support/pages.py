"""Support's admin pages: find a person and see everything they were (or were not) sent,
with their preferences, consent history and devices; and one notification with each of
its deliveries. Registered by deliveries/admin.py."""

from __future__ import annotations

import json

from django.conf import settings
from django.contrib import admin
from django.utils.html import format_html

from deliveries.models import Delivery, Device
from deliveries.selectors import recipient_timeline
from deliveries.support.devices import device_address_fingerprint, push_service_host
from notify.admin import ContactChangeInline, RecipientGrantInline
from notify.admin_mixins import ReadOnlyAdminMixin
from notify.models import Notification
from notify.payloads import payload_masked
from notify.selectors import recipients_matching
from preferences.admin import ConsentRecordInline, PreferenceInline, QuietHoursInline


class DeviceInline(admin.TabularInline):
    """The recipient's browsers and apps, live or deactivated (and why); their addresses
    only as fingerprints (deliveries/support/devices.py)."""

    model = Device
    fields = (
        "id",
        "kind",
        "platform",
        "service",
        "address",
        "active",
        "deactivated_reason",
        "registered_at",
    )
    readonly_fields = fields
    extra = 0
    can_delete = False

    def has_add_permission(self, request, obj=None) -> bool:
        return False

    @admin.display(description="Push service")
    def service(self, device: Device) -> str:
        return push_service_host(device)

    @admin.display(description="Endpoint / token fingerprint")
    def address(self, device: Device) -> str:
        return device_address_fingerprint(device)


class SupportRecipientAdmin(admin.ModelAdmin):
    """Support's page: find a person, see everything they were (or were not) sent."""

    list_display = ("user_id", "email", "phone", "locale", "timezone", "updated_at")
    search_fields = ("user_id", "email", "phone")  # see get_search_results
    search_help_text = "Product user id, email or phone: exact or the beginning of it."
    change_form_template = "admin/notify/recipient/change_form.html"
    show_full_result_count = False

    def get_search_results(self, request, queryset, search_term):
        """Exact or prefix match on the indexed columns only: fast at millions of rows."""
        term = search_term.strip()
        if not term:
            return queryset, False
        return recipients_matching(queryset, term), False

    inlines = [
        PreferenceInline,
        QuietHoursInline,
        ConsentRecordInline,
        DeviceInline,
        ContactChangeInline,
        RecipientGrantInline,
    ]

    def change_view(self, request, object_id, form_url="", extra_context=None):
        extra_context = extra_context or {}
        recipient = self.get_object(request, object_id)
        if recipient is not None:
            extra_context["timeline"] = recipient_timeline(
                recipient=recipient,
                page=request.GET.get("page", 1),
                per_page=settings.NOTIFY_SUPPORT_TIMELINE_PAGE_SIZE,
            )
        return super().change_view(request, object_id, form_url, extra_context)


# What support reads first about a delivery, wherever deliveries are listed.
DELIVERY_SUMMARY = ("channel", "target", "status", "reason", "attempts", "last_error")


class DeliveryInline(admin.TabularInline):
    model = Delivery
    extra = 0
    can_delete = False
    show_change_link = True
    fields = (*DELIVERY_SUMMARY, "template_version", "provider_message_id", "updated_at")
    readonly_fields = fields

    def has_add_permission(self, request, obj=None) -> bool:
        return False


class SupportNotificationAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    """One event: its payload (sensitive fields masked) and every delivery. History is
    evidence: nobody adds or edits it here."""

    list_display = (
        "id",
        "category",
        "recipient",
        "producer",
        "event_id",
        "subject",
        "occurred_at",
        "created_at",
        "routed_at",
    )
    list_filter = ("category",)
    search_fields = ("=id", "=event_id", "=recipient__user_id")
    list_select_related = ("category", "recipient", "producer")
    show_full_result_count = False
    fields = (
        "id",
        "producer",
        "event_id",
        "recipient",
        "category",
        "subject",
        "masked_payload",
        "channels",
        "ttl_seconds",
        "occurred_at",
        "created_at",
        "routed_at",
    )
    readonly_fields = fields
    inlines = [DeliveryInline]
    deletable = True

    @admin.display(description="Payload")
    def masked_payload(self, obj: Notification) -> str:
        masked = payload_masked(obj.payload, obj.category.payload_schema)
        return format_html("<pre>{}</pre>", json.dumps(masked, indent=2, ensure_ascii=False))
