"""Delivery analytics in admin: chart pages read from the store (analytics/charts/).

Open to staff holding `analytics.see_reports` only, a permission granted to no one
until an administrator gives it (superusers hold every permission). Everyone else is
refused (403), and the admin index does not list the pages for them.
"""

from __future__ import annotations

from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.urls import path

from analytics.charts import pages
from analytics.models import DeliveryReports

SEE_REPORTS = "analytics.see_reports"


@admin.register(DeliveryReports)
class DeliveryReportsAdmin(admin.ModelAdmin):
    """No rows to change: its "list" is the index of the chart pages."""

    def has_module_permission(self, request: HttpRequest) -> bool:
        return (
            request.user.is_active and request.user.is_staff and request.user.has_perm(SEE_REPORTS)
        )

    def has_view_permission(self, request: HttpRequest, obj=None) -> bool:
        return self.has_module_permission(request)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj=None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj=None) -> bool:
        return False

    def get_urls(self):
        name = "analytics_deliveryreports_"
        return [
            path("", self._page(pages.index_page), name=name + "changelist"),
            path(
                "campaign/<int:campaign_id>/",
                self._page(pages.campaign_page),
                name=name + "campaign",
            ),
            path("categories/", self._page(pages.categories_page), name=name + "categories"),
            path("providers/", self._page(pages.providers_page), name=name + "providers"),
        ]

    def _page(self, view):
        """`view` behind the admin's login and the reports permission, with the admin's
        context (its header, sidebar and breadcrumbs)."""

        def gated(request: HttpRequest, **kwargs) -> HttpResponse:
            if not self.has_module_permission(request):
                raise PermissionDenied
            context = {
                **self.admin_site.each_context(request),
                "opts": self.model._meta,
                "title": "Delivery analytics",
            }
            return view(request, context, **kwargs)

        return self.admin_site.admin_view(gated)
