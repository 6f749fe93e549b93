"""Routes outside /v1/: the one-click unsubscribe link in every marketing email."""

from django.urls import path

from preferences.api.views import unsubscribe_view

urlpatterns = [path("u/<str:token>", unsubscribe_view, name="unsubscribe")]
