from django.urls import path

from deliveries.api import stream, views, webhooks

urlpatterns = [
    path(
        "notifications/<uuid:notification_id>",
        views.NotificationCancelApi.as_view(),
        name="notification-cancel",
    ),
    path(
        "notifications/<uuid:notification_id>/status",
        views.NotificationStatusApi.as_view(),
        name="notification-status",
    ),
    path("users/<str:user_id>/stream", stream.stream, name="stream"),
    path("users/<str:user_id>/devices", views.DeviceRegisterApi.as_view(), name="device-register"),
    path(
        "users/<str:user_id>/devices/<int:device_id>",
        views.DeviceDeleteApi.as_view(),
        name="device-delete",
    ),
    path("webhooks/email/<str:esp>/tracking/", webhooks.esp_tracking, name="esp-tracking"),
]
