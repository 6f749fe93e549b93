from django.urls import path

from stream import views

urlpatterns = [
    path("users/<str:user_id>/stream", views.stream, name="stream"),
]
