"""Brevo's tracking webhook: HTTP basic auth (the credentials in the webhook's URL)."""

from anymail.webhooks.brevo import BrevoTrackingWebhookView

from deliveries.api.esp_tracking import Tracking


class BrevoTracking(Tracking, BrevoTrackingWebhookView):
    esp = "brevo"


view = BrevoTracking.as_view()
