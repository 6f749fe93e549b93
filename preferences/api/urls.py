from django.urls import path

from preferences.api import views

urlpatterns = [
    path("users/<str:user_id>/preferences", views.PreferencesApi.as_view(), name="preferences"),
    path("users/<str:user_id>/tokens", views.UserTokenApi.as_view(), name="user-tokens"),
    path(
        "users/<str:user_id>/preference-center-link",
        views.PreferenceCenterLinkApi.as_view(),
        name="preference-center-link",
    ),
]
