"""Routes outside /v1/: the one-click unsubscribe link in every marketing email and the
preference center linked from every email."""

from django.urls import path

from preferences.api.views import unsubscribe_view
from preferences.center_views import preference_center_page

urlpatterns = [
    path("u/<str:token>", unsubscribe_view, name="unsubscribe"),
    path("preferences/<str:token>", preference_center_page, name="preference-center"),
]
