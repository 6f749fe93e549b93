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
