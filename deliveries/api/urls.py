from django.urls import path

from deliveries.api import provider_tracking, views

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
    path("users/<str:user_id>/devices", views.DeviceRegisterApi.as_view(), name="device-register"),
    path(
        "users/<str:user_id>/devices/<int:device_id>",
        views.DeviceDeleteApi.as_view(),
        name="device-delete",
    ),
    path(
        "webhooks/email/<str:esp>/tracking/",
        provider_tracking.esp_tracking,
        name="esp-tracking",
    ),
]
