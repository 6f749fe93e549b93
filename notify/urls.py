from django.contrib import admin
from django.urls import include, path

from notify.ops import views as ops_views
from preferences.api.views import unsubscribe_view

urlpatterns = [
    path("admin/", admin.site.urls),
    path("v1/", include("notify.api.urls")),
    path("v1/", include("deliveries.api.urls")),
    path("v1/", include("preferences.api.urls")),
    path("u/<str:token>", unsubscribe_view, name="unsubscribe"),
    path("healthz", ops_views.healthz, name="healthz"),
    path("readyz", ops_views.readyz, name="readyz"),
    path("metrics", ops_views.metrics, name="metrics"),
]

handler404 = "notify.api.errors.json_not_found"
handler500 = "notify.api.errors.json_server_error"
