from django.urls import path

from deliveries.api import provider_tracking, stream, views, webhooks

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
    path(
        "webhooks/email/<str:esp>/tracking/",
        provider_tracking.esp_tracking,
        name="esp-tracking",
    ),
    path("webhooks", webhooks.WebhookListApi.as_view(), name="webhook-list"),
    path("webhooks/<int:webhook_id>", webhooks.WebhookDetailApi.as_view(), name="webhook-detail"),
    path(
        "webhooks/<int:webhook_id>/rotate-secret",
        webhooks.WebhookRotateApi.as_view(),
        name="webhook-rotate",
    ),
    path(
        "webhooks/<int:webhook_id>/enable",
        webhooks.WebhookEnableApi.as_view(),
        name="webhook-enable",
    ),
    path(
        "webhooks/<int:webhook_id>/redeliver",
        webhooks.WebhookRedeliverApi.as_view(),
        name="webhook-redeliver",
    ),
]
