from django.urls import path

from webhooks import api

urlpatterns = [
    path("webhooks", api.WebhookListApi.as_view(), name="webhook-list"),
    path("webhooks/<int:webhook_id>", api.WebhookDetailApi.as_view(), name="webhook-detail"),
    path(
        "webhooks/<int:webhook_id>/rotate-secret",
        api.WebhookRotateApi.as_view(),
        name="webhook-rotate",
    ),
    path("webhooks/<int:webhook_id>/enable", api.WebhookEnableApi.as_view(), name="webhook-enable"),
    path(
        "webhooks/<int:webhook_id>/redeliver",
        api.WebhookRedeliverApi.as_view(),
        name="webhook-redeliver",
    ),
]
