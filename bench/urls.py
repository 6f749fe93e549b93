"""The bare baselines' own URLconf, served by their own server (bench.bare_server),
never by the server under test: the two sides share no process."""

from django.urls import path

from bench import views
from notify.ops import views as ops_views

urlpatterns = [
    path("bench/bare-intake", views.BareIntakeView.as_view(), name="bench-bare-intake"),
    path(
        "bench/bare-unread/<str:user_id>",
        views.BareUnreadView.as_view(),
        name="bench-bare-unread",
    ),
    path("healthz", ops_views.healthz, name="healthz"),
]

handler404 = "notify.api.errors.json_not_found"
handler500 = "notify.api.errors.json_server_error"
