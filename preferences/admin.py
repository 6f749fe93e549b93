"""Admin: preferences and consent history, read-only.

A preference changes only through the API or the unsubscribe link, which write the
consent record in the same transaction; an admin form could not.
"""

from __future__ import annotations

from django.contrib import admin

from preferences.models import ConsentRecord, MarketingDayCount, Preference, QuietHours

CONSENT_FIELDS = (
    "created_at", "category", "channel", "granted", "source", "text_version", "ip_address",
    "user_agent",
)  # fmt: skip


class ReadOnlyMixin:
    """Consent records are evidence: nobody edits or deletes them from the admin."""

    def has_add_permission(self, request, obj=None) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False


class ConsentRecordInline(ReadOnlyMixin, admin.TabularInline):
    model = ConsentRecord
    fields = CONSENT_FIELDS
    readonly_fields = CONSENT_FIELDS
    ordering = ("id",)
    extra = 0


class PreferenceInline(ReadOnlyMixin, admin.TabularInline):
    """The recipient's changed cells (no row = the category default)."""

    model = Preference
    fields = ("category", "channel", "enabled", "source", "updated_at")
    readonly_fields = fields
    extra = 0


class QuietHoursInline(admin.StackedInline):
    model = QuietHours
    extra = 0
    max_num = 1


@admin.register(ConsentRecord)
class ConsentRecordAdmin(ReadOnlyMixin, admin.ModelAdmin):
    list_display = ("recipient", "category", "channel", "granted", "source", "created_at")
    list_filter = ("source", "granted")
    search_fields = ("recipient__user_id",)
    readonly_fields = ("recipient", *CONSENT_FIELDS)


@admin.register(Preference)
class PreferenceAdmin(ReadOnlyMixin, admin.ModelAdmin):
    """Read-only: a change must go through the API so its consent record is written."""

    list_display = ("recipient", "category", "channel", "enabled", "source", "updated_at")
    search_fields = ("recipient__user_id",)
    list_filter = ("enabled", "channel")


@admin.register(MarketingDayCount)
class MarketingDayCountAdmin(ReadOnlyMixin, admin.ModelAdmin):
    list_display = ("recipient", "local_date", "count")
    search_fields = ("recipient__user_id",)
