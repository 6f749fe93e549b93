"""`check --deploy` for the deliveries' own settings."""

from __future__ import annotations

from django.conf import settings
from django.core import checks


@checks.register(checks.Tags.security, deploy=True)
def check_email_provider(app_configs=None, **kwargs) -> list[checks.CheckMessage]:
    """`check --deploy`: email through an ESP needs its API token, and its tracking
    webhooks a secret (without one every event post is refused: bounces and complaints
    would never reach the suppression list)."""
    if not settings.NOTIFY_EMAIL_ESP:
        return []
    problems = []
    token = f"{settings.NOTIFY_EMAIL_ESP.upper()}_SERVER_TOKEN"
    if not settings.ANYMAIL.get(token):
        problems.append(
            checks.Error(f"NOTIFY_EMAIL_ESP is set but {token} is empty.", id="notify.E004")
        )
    if not settings.ANYMAIL.get("WEBHOOK_SECRET"):
        problems.append(
            checks.Error(
                "NOTIFY_ESP_WEBHOOK_SECRET is empty: the provider's bounces and complaints "
                "would all be refused.",
                id="notify.E005",
            )
        )
    return problems
