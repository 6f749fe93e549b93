"""Email over SMTP, or through an email service provider's API (by provider below)."""

from notify.env import (
    env_bool,
    env_float,
    env_int,
    env_list,
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
# "" (the default, and the demo's): email goes over SMTP as above. Otherwise the provider
# whose API sends it, with django-anymail's backend (deliveries/channels/esp/); its rate
# limit and breaker are then the provider's (NOTIFY_RATE_<PROVIDER>), not SMTP's.
NOTIFY_EMAIL_ESPS = ("postmark", "amazon_ses", "sendgrid", "mailgun", "brevo")
NOTIFY_EMAIL_ESP = env_str("NOTIFY_EMAIL_ESP", "").lower()
if NOTIFY_EMAIL_ESP and NOTIFY_EMAIL_ESP not in NOTIFY_EMAIL_ESPS:
    raise ValueError(f"NOTIFY_EMAIL_ESP must be one of {NOTIFY_EMAIL_ESPS} or empty")
# One ESP call, connecting included, ends by this deadline (seconds); only this much of
# its answer is read (every provider's answers, errors included, are well under 1 KiB).
NOTIFY_ESP_CALL_DEADLINE = env_float("NOTIFY_ESP_CALL_DEADLINE", 10.0, minimum=0.1)
NOTIFY_ESP_MAX_RESPONSE_BYTES = env_int("NOTIFY_ESP_MAX_RESPONSE_BYTES", 65536, minimum=1024)


def _or_none(value: str) -> str | None:
    """An empty setting as None (anymail's "not set")."""
    return value or None


# django-anymail's settings, by provider. Each *_API_URL (and AMAZON_SES_ENDPOINT_URL) is
# changed only to point at a test peer or another region of the provider.
ANYMAIL = {
    # Postmark: the server's API token (inline or a file path).
    "POSTMARK_SERVER_TOKEN": secret_text("POSTMARK_SERVER_TOKEN").strip(),
    "POSTMARK_API_URL": env_str("POSTMARK_API_URL", "https://api.postmarkapp.com/"),
    # SendGrid: an API key with Mail Send access. SENDGRID_WEBHOOK_VERIFICATION_KEY is the
    # public key of its signed Event Webhook (base64, as its settings page shows it): with
    # it every event post must carry a valid ECDSA signature.
    "SENDGRID_API_KEY": secret_text("SENDGRID_API_KEY").strip(),
    "SENDGRID_API_URL": env_str("SENDGRID_API_URL", "https://api.sendgrid.com/v3/"),
    "SENDGRID_TRACKING_WEBHOOK_VERIFICATION_KEY": secret_text(
        "SENDGRID_WEBHOOK_VERIFICATION_KEY"
    ).strip(),
    # Mailgun: the private API key; the sending domain (default: the From address's
    # domain); https://api.eu.mailgun.net/v3 for an EU domain; the HTTP webhook signing
    # key every event post is signed with (HMAC-SHA256); without it they are all refused.
    "MAILGUN_API_KEY": secret_text("MAILGUN_API_KEY").strip(),
    "MAILGUN_SENDER_DOMAIN": _or_none(env_str("MAILGUN_SENDER_DOMAIN", "")),
    "MAILGUN_API_URL": env_str("MAILGUN_API_URL", "https://api.mailgun.net/v3"),
    "MAILGUN_WEBHOOK_SIGNING_KEY": secret_text("MAILGUN_WEBHOOK_SIGNING_KEY").strip(),
    # Brevo: a v3 API key (transactional email).
    "BREVO_API_KEY": secret_text("BREVO_API_KEY").strip(),
    "BREVO_API_URL": env_str("BREVO_API_URL", "https://api.brevo.com/v3/"),
    # Amazon SES (API v2 through boto3): the region; credentials from these two or, when
    # they are empty, boto3's own chain (environment, instance role); the configuration
    # set whose event destination publishes to the SNS topic that posts our webhook. One
    # attempt per call (our retry policy retries), with the ESP deadline as its timeouts.
    "AMAZON_SES_SESSION_PARAMS": {
        key: value
        for key, value in {
            "aws_access_key_id": secret_text("AMAZON_SES_ACCESS_KEY_ID").strip(),
            "aws_secret_access_key": secret_text("AMAZON_SES_SECRET_ACCESS_KEY").strip(),
        }.items()
        if value
    },
    "AMAZON_SES_CLIENT_PARAMS": {
        "region_name": env_str("AMAZON_SES_REGION", "us-east-1"),
        "endpoint_url": _or_none(env_str("AMAZON_SES_ENDPOINT_URL", "")),
        "config": {
            "connect_timeout": NOTIFY_ESP_CALL_DEADLINE,
            "read_timeout": NOTIFY_ESP_CALL_DEADLINE,
            "retries": {"total_max_attempts": 1, "mode": "standard"},
            "proxies": {},  # none from the environment
        },
    },
    "AMAZON_SES_CONFIGURATION_SET_NAME": _or_none(env_str("AMAZON_SES_CONFIGURATION_SET", "")),
    # NOTIFY_ESP_WEBHOOK_SECRET: the "user:password" every tracking webhook verified by HTTP
    # basic auth must send (Postmark's, Amazon SES's SNS subscription, Brevo's; SendGrid's
    # unless its verification key is set; Mailgun's as well as its signature when set);
    # comma-separated to rotate it. Without it those posts are all refused.
    "WEBHOOK_SECRET": [
        part.strip() for part in secret_text("NOTIFY_ESP_WEBHOOK_SECRET").split(",") if part.strip()
    ],
    "REQUESTS_TIMEOUT": NOTIFY_ESP_CALL_DEADLINE,
}
# Amazon SES's events come through SNS, each message signed by SNS (its signature is
# always checked). Set these to the topic ARNs your SES configuration set publishes to
# and a message from any other topic is refused (SNS's advice); empty: any topic.
NOTIFY_SNS_TOPIC_ARNS = env_list("NOTIFY_SNS_TOPIC_ARNS", [])
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

# --- Bounces and complaints for SMTP ---------------------------------------------------
# NOTIFY_BOUNCE_DOMAIN: a domain whose mail reaches the `bounces` process (its MX, or an
# MTA that hands its mail over by SMTP or LMTP). When set, each email over SMTP is sent
# with the envelope sender NOTIFY_BOUNCE_LOCAL_PART+<delivery>.<signature>@<domain>, so a
# bounce says which delivery it is about; point the mailbox providers' feedback loops at
# any address of the domain for spam complaints. Empty (the default): the envelope sender
# is DEFAULT_FROM_EMAIL and late bounces never come back (docs/email-providers.md).
NOTIFY_BOUNCE_DOMAIN = env_str("NOTIFY_BOUNCE_DOMAIN", "").strip().lower()
NOTIFY_BOUNCE_LOCAL_PART = env_str("NOTIFY_BOUNCE_LOCAL_PART", "bounces")
# Where the `bounces` process listens (host:port), and whether it speaks LMTP (as a local
# MTA's delivery agent) rather than SMTP.
NOTIFY_BOUNCE_LISTEN = env_str("NOTIFY_BOUNCE_LISTEN", "127.0.0.1:2525")
NOTIFY_BOUNCE_LMTP = env_bool("NOTIFY_BOUNCE_LMTP", False)
# The largest mail it accepts (bytes); a bigger one is refused at DATA (552).
NOTIFY_BOUNCE_MAX_BYTES = env_int("NOTIFY_BOUNCE_MAX_BYTES", 10 * 1024 * 1024, minimum=1024)
