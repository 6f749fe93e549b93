"""Postmark's tracking webhook: HTTP basic auth (the credentials in the webhook's URL)."""

from anymail.webhooks.postmark import PostmarkTrackingWebhookView

from deliveries.api.esp_tracking import Tracking


class PostmarkTracking(Tracking, PostmarkTrackingWebhookView):
    esp = "postmark"


view = PostmarkTracking.as_view()
