"""`check --deploy` for the deliveries' own settings."""

from __future__ import annotations

from django.conf import settings
from django.core import checks

# Each email provider's API credential (anymail's setting; Amazon SES may use boto3's own
# chain instead: none required), and the settings (anymail's, and the environment
# variable that sets it) of which at least one verifies its tracking webhooks.
_ESP_TOKENS = {
    "postmark": "POSTMARK_SERVER_TOKEN",
    "sendgrid": "SENDGRID_API_KEY",
    "mailgun": "MAILGUN_API_KEY",
    "brevo": "BREVO_API_KEY",
}
_BASIC_AUTH = ("WEBHOOK_SECRET", "NOTIFY_ESP_WEBHOOK_SECRET")
_ESP_WEBHOOK_SECRETS = {
    "mailgun": (("MAILGUN_WEBHOOK_SIGNING_KEY", "MAILGUN_WEBHOOK_SIGNING_KEY"),),
    "sendgrid": (
        _BASIC_AUTH,
        ("SENDGRID_TRACKING_WEBHOOK_VERIFICATION_KEY", "SENDGRID_WEBHOOK_VERIFICATION_KEY"),
    ),
}


@checks.register(checks.Tags.security, deploy=True)
def check_email_provider(app_configs=None, **kwargs) -> list[checks.CheckMessage]:
    """`check --deploy`: email through an ESP needs its API token, and its tracking
    webhooks a secret (without one every event post is refused: bounces and complaints
    would never reach the suppression list)."""
    # The one ESP, or every ESP of a failover list (NOTIFY_EMAIL_PROVIDERS).
    listed = [p for p in settings.NOTIFY_CHANNEL_FAILOVER.get("email", []) if p != "smtp"]
    problems = []
    for esp in dict.fromkeys([settings.NOTIFY_EMAIL_ESP, *listed]):
        if esp:
            problems.extend(_esp_problems(esp))
    return problems


def _esp_problems(esp: str) -> list[checks.CheckMessage]:
    """One provider's missing token or webhook secret."""
    problems = []
    token = _ESP_TOKENS.get(esp)
    if token and not settings.ANYMAIL.get(token):
        problems.append(checks.Error(f"{esp} sends email but {token} is empty.", id="notify.E004"))
    secrets = _ESP_WEBHOOK_SECRETS.get(esp, (_BASIC_AUTH,))
    if not any(settings.ANYMAIL.get(name) for name, _ in secrets):
        names = " or ".join(variable for _, variable in secrets)
        problems.append(
            checks.Error(
                f"{names} is empty: the provider's bounces and complaints would all be refused.",
                id="notify.E005",
            )
        )
    return problems
