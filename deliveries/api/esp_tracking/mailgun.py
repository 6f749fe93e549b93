"""Mailgun's tracking webhook: each post signed with the HTTP webhook signing key
(HMAC-SHA256 of its timestamp and token; MAILGUN_WEBHOOK_SIGNING_KEY), and HTTP basic
auth as well when NOTIFY_ESP_WEBHOOK_SECRET is set. Without the signing key every post
is refused (an empty key would be a key anyone can sign with)."""

from anymail.webhooks.mailgun import MailgunTrackingWebhookView

from deliveries.api.esp_tracking import Tracking


class MailgunTracking(Tracking, MailgunTrackingWebhookView):
    esp = "mailgun"

    def secret_configured(self) -> bool:
        return bool(self.webhook_signing_key)


view = MailgunTracking.as_view()
