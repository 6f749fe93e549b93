"""The root URLconf: every app's routes."""

from django.contrib import admin
from django.urls import include, path

from notify.ops import views as ops_views

urlpatterns = [
    path("admin/", admin.site.urls),
    path("v1/", include("notify.api.urls")),
    path("v1/", include("deliveries.api.urls")),
    path("v1/", include("stream.urls")),
    path("v1/", include("webhooks.urls")),
    path("v1/", include("preferences.api.urls")),
    path("v1/", include("campaigns.api.urls")),
    path("v1/", include("analytics.api.urls")),
    path("", include("preferences.api.public_urls")),
    path("", include("deliveries.ops.urls")),
    path("", include("preferences.inbox_demo")),
    path("healthz", ops_views.healthz, name="healthz"),
    path("readyz", ops_views.readyz, name="readyz"),
]

handler404 = "notify.api.errors.json_not_found"
handler500 = "notify.api.errors.json_server_error"
