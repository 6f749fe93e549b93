"""The project's URLs plus the bare baselines the bench compares them with."""

from django.urls import path

from bench import views
from config.urls import urlpatterns as project_urlpatterns

# Listed first: the project's routes then pay the extra resolver checks, not the bare
# baselines, so the comparison leans against the project if anything.
urlpatterns = [
    path("bench/bare-intake", views.BareIntakeView.as_view(), name="bench-bare-intake"),
    path(
        "bench/bare-unread/<str:user_id>",
        views.BareUnreadView.as_view(),
        name="bench-bare-unread",
    ),
    *project_urlpatterns,
]

handler404 = "notify.api.errors.json_not_found"
handler500 = "notify.api.errors.json_server_error"
