"""Archived months in admin, read only: retention and the restore command write them."""

from __future__ import annotations

from django.contrib import admin

from history.models import ArchivedMonth
from notify.admin_mixins import ReadOnlyAdminMixin


@admin.register(ArchivedMonth)
class ArchivedMonthAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = ("month", "state", "rows", "archived_at", "restored_at", "attempted_at")
    list_filter = ("state",)
    readonly_fields = (
        "month",
        "state",
        "files",
        "error",
        "attempted_at",
        "archived_at",
        "restored_at",
        "erased_through",
    )

    @admin.display(description="rows")
    def rows(self, obj: ArchivedMonth) -> int:
        return sum(entry.get("rows", 0) for entry in obj.files.values())
