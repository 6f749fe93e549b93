"""Deliveries in admin: what happened to each, and a re-drive for what could not go out."""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.contrib import admin, messages
from django.utils import timezone

from deliveries.models import (
    AddressSuppression,
    BounceMail,
    DeadLetter,
    Delivery,
    DeliveryAttempt,
    DeliveryRedrive,
    DeliveryStatus,
    Device,
    DigestItem,
    DigestWindow,
    EarlyProviderEvent,
)
from deliveries.ops.selectors import open_dead_letters
from deliveries.pipeline.dead_letters import dead_letters_redrive
from deliveries.pipeline.redrive import REDRIVABLE, deliveries_redrive
from deliveries.support.devices import DeviceAdmin
from deliveries.support.pages import DELIVERY_SUMMARY, SupportNotificationAdmin
from deliveries.support.send_to_me import send_to_me_register
from notify.admin_mixins import ReadOnlyAdminMixin
from notify.broker import queue_depth
from notify.models import Notification
from notify.ops.beat import beat_jobs

# The start of a kept bounce mail shown on its page: the report and the original's headers.
MAIL_SHOWN_BYTES = 16 * 1024

# The template admin (a lower layer) sends "Send test to me" on in-app, push and SMS
# through this app's pipeline; it is told how here, when the admin loads, and so never
# imports deliveries.
send_to_me_register()


class DeliveryAttemptInline(admin.TabularInline):
    model = DeliveryAttempt
    extra = 0
    can_delete = False
    readonly_fields = (
        "number",
        "provider",
        "started_at",
        "duration_ms",
        "held_ms",
        "outcome",
        "status_code",
        "response",
    )

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
    list_display = ("id", "notification", *DELIVERY_SUMMARY, "updated_at")
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

    @admin.action(
        description="Re-drive (queue again with a fresh attempt budget)", permissions=["redrive"]
    )
    def redrive(self, request, queryset):
        chosen = list(queryset.values_list("pk", flat=True))
        count = deliveries_redrive(delivery_ids=chosen, by=request.user)
        skipped = len(chosen) - count
        self.message_user(request, f"Re-driven: {count}.", messages.SUCCESS)
        if skipped:
            labels = ", ".join(DeliveryStatus(s).label for s in REDRIVABLE)
            self.message_user(
                request,
                f"Skipped {skipped}: only {labels} deliveries are re-driven.",
                messages.WARNING,
            )

    def changelist_view(self, request, extra_context=None):
        extra_context = extra_context or {}
        try:
            extra_context["dead_letter_depth"] = queue_depth("dead_letter")
        except Exception:  # the broker being away must not take the admin page with it
            extra_context["dead_letter_depth"] = None
        extra_context["dead_letters_open"] = open_dead_letters()
        try:
            jobs = beat_jobs()
        except Exception:  # Redis away: say so rather than fail the page
            jobs = None
        extra_context["beat_jobs"] = jobs
        extra_context["beat_overdue"] = [job.name for job in jobs or [] if job.overdue]
        return super().changelist_view(request, extra_context)


class DeadLetterStateFilter(admin.SimpleListFilter):
    title = "state"
    parameter_name = "state"

    def lookups(self, request, model_admin):
        return [("open", "Open"), ("redriven", "Re-driven")]

    def queryset(self, request, queryset):
        if self.value() == "open":
            return queryset.filter(redriven_at__isnull=True)
        if self.value() == "redriven":
            return queryset.filter(redriven_at__isnull=False)
        return queryset


@admin.register(DeadLetter)
class DeadLetterAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    """Messages RabbitMQ dead-lettered, moved here by the dead-letter consumer. Evidence:
    read-only; the one change is a re-drive (the same permission as for deliveries)."""

    list_display = (
        "id",
        "task",
        "arguments",
        "reason",
        "queue",
        "count",
        "first_seen_at",
        "last_seen_at",
        "redriven_at",
        "redriven_by",
    )
    list_filter = (DeadLetterStateFilter, "task", "reason", "queue")
    search_fields = ("=message_id", "task")
    list_select_related = ("redriven_by",)
    actions = ["redrive"]
    deletable = True

    def get_readonly_fields(self, request, obj=None):
        return [field.name for field in DeadLetter._meta.fields]

    def has_redrive_permission(self, request) -> bool:
        return request.user.has_perm("deliveries.redrive_delivery")

    @admin.action(
        description="Re-drive (publish the task again as it was)", permissions=["redrive"]
    )
    def redrive(self, request, queryset):
        chosen = list(queryset.values_list("pk", flat=True))
        count = dead_letters_redrive(dead_letter_ids=chosen, by=request.user)
        self.message_user(request, f"Re-driven: {count}.", messages.SUCCESS)
        if len(chosen) > count:
            self.message_user(
                request, f"Skipped {len(chosen) - count}: already re-driven.", messages.WARNING
            )


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


# Recipients are registered by campaigns/admin.py (SupportRecipientAdmin with erasure).
admin.site.register(Notification, SupportNotificationAdmin)
admin.site.register(Device, DeviceAdmin)  # its secrets only as fingerprints


class DigestItemInline(admin.TabularInline):
    model = DigestItem
    extra = 0
    can_delete = False
    fields = ("delivery_id", "notification_id", "occurred_at")
    readonly_fields = fields

    def has_add_permission(self, request, obj=None) -> bool:
        return False


@admin.register(DigestWindow)
class DigestWindowAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    """Support's view of digests: which events went into which digest, and what its
    close decided (the carrier is the delivery that was sent; the others are
    `digested`, or all `suppressed` with the gate's reason)."""

    list_display = (
        "id",
        "recipient",
        "category",
        "channel",
        "digest_key",
        "state",
        "items_count",
        "opened_at",
        "closes_at",
        "closed_at",
        "carrier_id",
    )
    list_filter = ("state", "channel")
    search_fields = ("recipient__user_id", "digest_key", "=carrier_id")
    raw_id_fields = ("recipient",)
    inlines = [DigestItemInline]
    readonly_fields = (
        "recipient",
        "category",
        "channel",
        "digest_key",
        "state",
        "opened_at",
        "closes_at",
        "closed_at",
        "items_count",
        "carrier_id",
        "carrier_accepted_at",
    )
    deletable = True


@admin.register(EarlyProviderEvent)
class EarlyProviderEventAdmin(admin.ModelAdmin):
    """Provider events that came before their send's record: waiting, or given up."""

    list_display = ("received_at", "esp", "kind", "message_id", "given_up_at")
    list_filter = ("esp", "kind", ("given_up_at", admin.EmptyFieldListFilter))
    search_fields = ("=message_id",)
    readonly_fields = [f.name for f in EarlyProviderEvent._meta.fields]

    def has_add_permission(self, request) -> bool:
        return False


@admin.register(BounceMail)
class BounceMailAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    """Every mail the bounce domain received: applied, a replay, not a bounce (an
    out-of-office reply) or naming no delivery of ours; kept for inspection."""

    deletable = True
    list_display = ("received_at", "kind", "outcome", "envelope_to", "subject", "delivery_id")
    list_filter = ("outcome", "kind")
    search_fields = ("envelope_to", "message_id", "subject")
    date_hierarchy = "received_at"
    exclude = ("raw",)
    readonly_fields = ("mail",)

    @admin.display(description="Mail as received (start)")
    def mail(self, obj: BounceMail) -> str:
        return bytes(obj.raw[:MAIL_SHOWN_BYTES]).decode("utf-8", "replace")
