"""Email over SMTP."""

from notify.env import (
    env_bool,
    env_float,
    env_int,
    env_str,
    secret_text,
)

# --- Email over SMTP --------------------------------------------------------------------
EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
EMAIL_HOST = env_str("EMAIL_HOST", "127.0.0.1")
EMAIL_PORT = env_int("EMAIL_PORT", 1025, minimum=1)
EMAIL_HOST_USER = env_str("EMAIL_HOST_USER", "")
EMAIL_HOST_PASSWORD = secret_text("EMAIL_HOST_PASSWORD")
EMAIL_USE_TLS = env_bool("EMAIL_USE_TLS", False)
EMAIL_USE_SSL = env_bool("EMAIL_USE_SSL", False)
EMAIL_TIMEOUT = env_float("EMAIL_TIMEOUT", 10.0, minimum=0.1)
DEFAULT_FROM_EMAIL = env_str("DEFAULT_FROM_EMAIL", "Notify <notify@localhost>")
# A sender thread keeps its SMTP session open between sends; one idle longer than this
# is reopened first (relays close idle sessions after a minute or more).
NOTIFY_SMTP_KEEP_IDLE_SECONDS = env_float("NOTIFY_SMTP_KEEP_IDLE_SECONDS", 30.0, minimum=0)
NOTIFY_EMAIL_MESSAGE_ID_DOMAIN = env_str("NOTIFY_EMAIL_MESSAGE_ID_DOMAIN", "notify.localhost")

# --- Email through an email service provider (ESP) ----------------------------------------
# "" (the default, and the demo's): email goes over SMTP as above. "postmark": through
# Postmark's API with django-anymail's backend (deliveries/channels/email_esp.py); its
# rate limit and breaker are then the ESP's (NOTIFY_RATE_POSTMARK), not SMTP's.
NOTIFY_EMAIL_ESPS = ("postmark",)
NOTIFY_EMAIL_ESP = env_str("NOTIFY_EMAIL_ESP", "").lower()
if NOTIFY_EMAIL_ESP and NOTIFY_EMAIL_ESP not in NOTIFY_EMAIL_ESPS:
    raise ValueError(f"NOTIFY_EMAIL_ESP must be one of {NOTIFY_EMAIL_ESPS} or empty")
# One ESP call, connecting included, ends by this deadline (seconds); only this much of
# its answer is read (Postmark's answers, errors included, are well under 1 KiB).
NOTIFY_ESP_CALL_DEADLINE = env_float("NOTIFY_ESP_CALL_DEADLINE", 10.0, minimum=0.1)
NOTIFY_ESP_MAX_RESPONSE_BYTES = env_int("NOTIFY_ESP_MAX_RESPONSE_BYTES", 65536, minimum=1024)
# django-anymail's settings. POSTMARK_API_URL is set only to point at a test peer.
# WEBHOOK_SECRET is the "user:password" the ESP's tracking webhooks must send as HTTP
# basic auth (how anymail authenticates Postmark; comma-separated to rotate it); without
# it every tracking webhook is refused.
ANYMAIL = {
    "POSTMARK_SERVER_TOKEN": secret_text("POSTMARK_SERVER_TOKEN").strip(),
    "POSTMARK_API_URL": env_str("POSTMARK_API_URL", "https://api.postmarkapp.com/"),
    "WEBHOOK_SECRET": [
        part.strip() for part in secret_text("NOTIFY_ESP_WEBHOOK_SECRET").split(",") if part.strip()
    ],
    "REQUESTS_TIMEOUT": NOTIFY_ESP_CALL_DEADLINE,
}
# Longest provider detail (bounce text, MTA answer) kept with a provider event.
NOTIFY_PROVIDER_EVENT_DETAIL_CHARS = env_int("NOTIFY_PROVIDER_EVENT_DETAIL_CHARS", 500, minimum=50)
# A provider event can overtake the record of its send (outcomes are recorded at the end
# of a sender's round). It waits and is applied by a beat sweep (every
# NOTIFY_PROVIDER_EVENT_SWEEP_INTERVAL seconds, on `low`) once its delivery is recorded;
# one still unmatched after NOTIFY_PROVIDER_EVENT_WAIT seconds is given up (logged, its
# text dropped) and kept NOTIFY_PROVIDER_EVENT_UNMATCHED_DAYS days for inspection.
NOTIFY_PROVIDER_EVENT_SWEEP_INTERVAL = env_float(
    "NOTIFY_PROVIDER_EVENT_SWEEP_INTERVAL", 5.0, minimum=0.5
)
NOTIFY_PROVIDER_EVENT_WAIT = env_float("NOTIFY_PROVIDER_EVENT_WAIT", 3600.0, minimum=0)
NOTIFY_PROVIDER_EVENT_UNMATCHED_DAYS = env_int("NOTIFY_PROVIDER_EVENT_UNMATCHED_DAYS", 7, minimum=1)
NOTIFY_PROVIDER_EVENT_SWEEP_BATCH = env_int("NOTIFY_PROVIDER_EVENT_SWEEP_BATCH", 500, minimum=1)
