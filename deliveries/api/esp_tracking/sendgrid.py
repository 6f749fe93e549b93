"""SendGrid's Event Webhook: its signed form (ECDSA over the timestamp and body, verified
with SENDGRID_WEBHOOK_VERIFICATION_KEY) and/or HTTP basic auth (NOTIFY_ESP_WEBHOOK_SECRET
in the webhook's URL): each one configured is required; with neither every post is
refused. (anymail warns once per process that its maintainers no longer test SendGrid
against a live account; the webhook's shape and signature are as documented.)"""

from anymail.webhooks.sendgrid import SendGridTrackingWebhookView

from deliveries.api.esp_tracking import Tracking


class SendGridTracking(Tracking, SendGridTrackingWebhookView):
    esp = "sendgrid"

    def secret_configured(self) -> bool:
        return bool(self.basic_auth or self.webhook_verification_key)


view = SendGridTracking.as_view()
