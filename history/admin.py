"""Archived months in admin, read only: retention and the restore command write them; and
support's "older history" of a person, linked from their timeline: months past retention
read in place from the archive, with the analytics store's events (history/older.py)."""

from __future__ import annotations

import logging

from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.urls import path

from history.models import ArchivedMonth
from history.older import older_history_page, older_history_start
from notify.admin_mixins import ReadOnlyAdminMixin
from notify.models import Recipient

logger = logging.getLogger(__name__)


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

    def get_urls(self):
        older = path(
            "person/<int:recipient_pk>/",
            self.admin_site.admin_view(self.older_history_view),
            name="history_older_history",
        )
        return [older, *super().get_urls()]

    def older_history_view(self, request: HttpRequest, recipient_pk: int) -> HttpResponse:
        """A person's history past what their timeline shows, every producer's: the slower
        path (the archive's files and the store, seconds rather than milliseconds)."""
        if not request.user.has_perm("notify.view_recipient"):
            raise PermissionDenied
        recipient = Recipient.objects.filter(pk=recipient_pk).first()
        if recipient is None:  # erased, or never there: nothing of theirs is kept
            raise Http404("No such person.")
        error, page = "", None
        try:
            page = older_history_page(recipient=recipient, cursor=request.GET.get("cursor"))
        except Exception as failure:  # the store or the archive away: say so on the page
            logger.exception("older history of recipient %s", recipient_pk)
            error = f"{type(failure).__name__}: {failure}"[:500]
        context = {
            **self.admin_site.each_context(request),
            "title": f"Older history of {recipient.user_id}",
            "recipient": recipient,
            "page": page,
            "error": error,
            "since": older_history_start(),
        }
        return TemplateResponse(request, "admin/history/older_history.html", context)
