"""Deliveries in admin: what happened to each, and a re-drive for what could not go out."""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.contrib import admin, messages
from django.utils import timezone

from deliveries.models import (
    AddressSuppression,
    Delivery,
    DeliveryAttempt,
    DeliveryRedrive,
    DeliveryStatus,
    Device,
)
from deliveries.redrive import REDRIVABLE, deliveries_redrive
from deliveries.support import SupportNotificationAdmin, SupportRecipientAdmin
from notify.broker import queue_depth
from notify.models import Notification, Recipient


class DeliveryAttemptInline(admin.TabularInline):
    model = DeliveryAttempt
    extra = 0
    can_delete = False
    readonly_fields = ("number", "started_at", "duration_ms", "outcome", "status_code", "response")

    def has_add_permission(self, request, obj=None) -> bool:
        return False


class DeliveryRedriveInline(admin.TabularInline):
    model = DeliveryRedrive
    extra = 0
    can_delete = False
    readonly_fields = ("at", "by", "previous_status", "previous_reason", "previous_attempts")

    def has_add_permission(self, request, obj=None) -> bool:
        return False


class ProviderFilter(admin.SimpleListFilter):
    title = "provider"
    parameter_name = "provider"

    def lookups(self, request, model_admin):
        providers = sorted(set(settings.NOTIFY_CHANNEL_PROVIDERS.values()))
        return [(provider, provider) for provider in providers]

    def queryset(self, request, queryset):
        if not self.value():
            return queryset
        channels = [c for c, p in settings.NOTIFY_CHANNEL_PROVIDERS.items() if p == self.value()]
        return queryset.filter(channel__in=channels)


class AgeFilter(admin.SimpleListFilter):
    """How long ago the delivery last changed (for dead ones: when it died)."""

    title = "age"
    parameter_name = "age"
    _AGES = {"1h": timedelta(hours=1), "1d": timedelta(days=1), "7d": timedelta(days=7)}

    def lookups(self, request, model_admin):
        return [("1h", "Last hour"), ("1d", "Last day"), ("7d", "Last week"), ("old", "Older")]

    def queryset(self, request, queryset):
        value = self.value()
        if value in self._AGES:
            return queryset.filter(updated_at__gte=timezone.now() - self._AGES[value])
        if value == "old":
            return queryset.filter(updated_at__lt=timezone.now() - self._AGES["7d"])
        return queryset


@admin.register(Delivery)
class DeliveryAdmin(admin.ModelAdmin):
    list_display = ("id", "notification", "channel", "target", "status", "reason", "attempts",
                    "last_error", "updated_at")  # fmt: skip
    list_filter = ("status", "channel", ProviderFilter, "reason", AgeFilter, "queue")
    search_fields = ("=target", "=notification__id")
    list_select_related = ("notification",)
    show_full_result_count = False
    inlines = [DeliveryAttemptInline, DeliveryRedriveInline]
    actions = ["redrive"]
    change_list_template = "admin/deliveries/delivery/change_list.html"

    def get_readonly_fields(self, request, obj=None):
        # History is evidence; the only change allowed is a re-drive, through its action.
        return [field.name for field in Delivery._meta.fields]

    def has_add_permission(self, request) -> bool:
        return False

    def has_redrive_permission(self, request) -> bool:
        return request.user.has_perm("deliveries.redrive_delivery")

    @admin.action(description="Re-drive (queue again with a fresh attempt budget)",
                  permissions=["redrive"])  # fmt: skip
    def redrive(self, request, queryset):
        chosen = list(queryset.values_list("pk", flat=True))
        count = deliveries_redrive(delivery_ids=chosen, by=request.user)
        skipped = len(chosen) - count
        self.message_user(request, f"Re-driven: {count}.", messages.SUCCESS)
        if skipped:
            labels = ", ".join(DeliveryStatus(s).label for s in REDRIVABLE)
            self.message_user(
                request, f"Skipped {skipped}: only {labels} deliveries are re-driven.",
                messages.WARNING,
            )  # fmt: skip

    def changelist_view(self, request, extra_context=None):
        extra_context = extra_context or {}
        try:
            extra_context["dead_letter_depth"] = queue_depth("dead_letter")
        except Exception:  # the broker being away must not take the admin page with it
            extra_context["dead_letter_depth"] = None
        return super().changelist_view(request, extra_context)


@admin.register(Device)
class DeviceAdmin(admin.ModelAdmin):
    list_display = ("id", "recipient", "kind", "platform", "active", "deactivated_reason",
                    "updated_at")  # fmt: skip
    list_filter = ("kind", "active", "deactivated_reason")
    search_fields = ("=recipient__user_id", "=id")
    list_select_related = ("recipient",)
    readonly_fields = ("recipient", "created_at", "updated_at")


@admin.register(AddressSuppression)
class AddressSuppressionAdmin(admin.ModelAdmin):
    """The hard-bounce list. Support deletes an entry to lift it (the person fixed their
    mailbox or number); entries are added only by bounces, with the bounce as evidence."""

    list_display = ("address", "channel", "evidence", "created_at")
    list_filter = ("channel",)
    search_fields = ("address",)
    readonly_fields = ("channel", "address", "evidence", "created_at")

    def has_add_permission(self, request) -> bool:
        return False


admin.site.register(Recipient, SupportRecipientAdmin)
admin.site.register(Notification, SupportNotificationAdmin)
