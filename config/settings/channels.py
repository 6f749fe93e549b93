"""Which channels are on, their fallback, their limits in templates and rendering, and
the pressure on their providers (rate limits, circuit breakers)."""

import os

from config.settings.email import NOTIFY_EMAIL_ESP, NOTIFY_EMAIL_ESPS
from config.settings.push import FCM_CREDENTIALS, WEBPUSH_VAPID_PRIVATE_KEY
from notify.env import (
    env_float,
    env_int,
    env_list,
    env_str,
)

# --- Fallback channel ----------------------------------------------------------------------
# A delivery on these channels that ends dead is followed by the category's fallback
# channel (Category.fallback_channel), through the gate.
NOTIFY_FALLBACK_FROM_CHANNELS = env_list("NOTIFY_FALLBACK_FROM_CHANNELS", ["sms"])
# --- Channels ------------------------------------------------------------------------
# Channels with a working provider here; others are recorded as suppressed, not tried.
# Unset: in-app and email, plus Web Push once a VAPID key is set, FCM once its
# credentials are, and SMS once SMPP_HOST is set in the environment (its default above
# only names a local SMSC, which is no sign one is there). An explicit list wins.
NOTIFY_CHANNELS_ENABLED = env_list(
    "NOTIFY_CHANNELS_ENABLED",
    ["inapp", "email"]
    + (["webpush"] if WEBPUSH_VAPID_PRIVATE_KEY else [])
    + (["fcm"] if FCM_CREDENTIALS else [])
    + (["sms"] if "SMPP_HOST" in os.environ else []),
)

# --- Templates and rendering ---------------------------------------------------------------
# Channel limits checked when a template is saved and applied when rendering.
NOTIFY_PUSH_TITLE_MAX_CHARS = env_int("NOTIFY_PUSH_TITLE_MAX_CHARS", 50, minimum=1)
NOTIFY_PUSH_BODY_MAX_CHARS = env_int("NOTIFY_PUSH_BODY_MAX_CHARS", 150, minimum=2)
NOTIFY_SMS_MAX_SEGMENTS = env_int("NOTIFY_SMS_MAX_SEGMENTS", 3, minimum=1)
# Used by the money filter when the payload names no currency.
NOTIFY_DEFAULT_CURRENCY = env_str("NOTIFY_DEFAULT_CURRENCY", "EUR")
NOTIFY_DEFAULT_TIMEZONE = env_str("NOTIFY_DEFAULT_TIMEZONE", "UTC")
# Rendering bounds, the same in validation, preview and sending (one field at a time):
# past them the render stops; at send the delivery fails with reason `render_limit`. The
# character budget counts the output and the values the template computes (with, firstof,
# if conditions, add, join), so a value built by nesting cannot outgrow it unseen.
NOTIFY_TEMPLATE_RENDER_SECONDS = env_float("NOTIFY_TEMPLATE_RENDER_SECONDS", 1.0, minimum=0.01)
NOTIFY_TEMPLATE_MAX_OUTPUT_CHARS = env_int("NOTIFY_TEMPLATE_MAX_OUTPUT_CHARS", 262144, minimum=1024)
# Loops inside loops inside loops cost the product of list sizes no sample shows: refused.
NOTIFY_TEMPLATE_MAX_LOOP_DEPTH = env_int("NOTIFY_TEMPLATE_MAX_LOOP_DEPTH", 2, minimum=1)
# floatformat precision, and the exponent of any number a filter formats.
NOTIFY_TEMPLATE_MAX_DECIMALS = env_int("NOTIFY_TEMPLATE_MAX_DECIMALS", 20, minimum=0)
NOTIFY_TEMPLATE_MAX_NUMBER_DIGITS = env_int("NOTIFY_TEMPLATE_MAX_NUMBER_DIGITS", 100, minimum=20)

# --- Provider pressure: rate limits and circuit breakers -----------------------------------
# Which provider each channel talks to; limits and breakers are per provider.
NOTIFY_CHANNEL_PROVIDERS = {
    "email": NOTIFY_EMAIL_ESP or "smtp",
    "webpush": "webpush",
    "fcm": "fcm",
    "sms": "smpp",
}
# Provider failover within a channel (docs/email-providers.md): email's providers in
# order, e.g. "postmark,smtp", each with its own rate limit, breaker and credentials. A
# delivery moves down the list when a provider's breaker is open, when it refused the
# message transiently, or when its measured latency would miss the delivery's deadline.
# Unset: the one provider above (NOTIFY_EMAIL_ESP, else SMTP), exactly as without failover.
NOTIFY_EMAIL_PROVIDERS = [p.lower() for p in env_list("NOTIFY_EMAIL_PROVIDERS", [])]
for _provider in NOTIFY_EMAIL_PROVIDERS:
    if _provider != "smtp" and _provider not in NOTIFY_EMAIL_ESPS:
        raise ValueError(
            f"NOTIFY_EMAIL_PROVIDERS: {_provider!r} is not smtp or one of {NOTIFY_EMAIL_ESPS}"
        )
if NOTIFY_EMAIL_PROVIDERS:
    NOTIFY_CHANNEL_PROVIDERS["email"] = NOTIFY_EMAIL_PROVIDERS[0]  # the primary
# SMS's binds in failover order: "smpp,smpp2" (the second bind: SMPP2_*). Unset: one bind.
NOTIFY_SMS_PROVIDERS = [p.lower() for p in env_list("NOTIFY_SMS_PROVIDERS", [])]
if set(NOTIFY_SMS_PROVIDERS) - {"smpp", "smpp2"}:
    raise ValueError("NOTIFY_SMS_PROVIDERS may name smpp and smpp2 only")
if NOTIFY_SMS_PROVIDERS:
    NOTIFY_CHANNEL_PROVIDERS["sms"] = NOTIFY_SMS_PROVIDERS[0]
# Each channel's ordered providers when it has a list (a channel not named: no failover).
NOTIFY_CHANNEL_FAILOVER = {
    channel: providers
    for channel, providers in (("email", NOTIFY_EMAIL_PROVIDERS), ("sms", NOTIFY_SMS_PROVIDERS))
    if providers
}
# Per-provider token buckets, "rate/s:burst", shared by every worker through Redis. The
# email service providers' (NOTIFY_RATE_POSTMARK, _AMAZON_SES, _SENDGRID, _MAILGUN, _BREVO)
# follow what each publishes: Amazon SES's sandbox rate (1/s; production accounts get
# their own MaxSendRate: set it), SendGrid's Mail Send (10,000 requests/s), Brevo's
# POST /v3/smtp/email (1,000/s); Postmark and Mailgun publish none for sending (they
# throttle by account), so theirs is SMTP's.
NOTIFY_PROVIDER_RATE_LIMITS = {
    provider: env_str(f"NOTIFY_RATE_{provider.upper()}", default)
    for provider, default in {
        "smtp": "50:100",
        "webpush": "200:400",
        "fcm": "500:1000",
        "smpp": "30:30",
        "smpp2": "30:30",
        "postmark": "50:100",
        "amazon_ses": "1:1",
        "sendgrid": "10000:10000",
        "mailgun": "50:100",
        "brevo": "1000:1000",
    }.items()
}
# Low-priority traffic may only take tokens while this fraction of the bucket remains,
# so a saturating campaign leaves room for login codes (high uses under 80 %).
NOTIFY_LOW_PRIORITY_RESERVE = env_float("NOTIFY_LOW_PRIORITY_RESERVE", 0.2, minimum=0)
# A sender waits for a token at most this long in place; longer → short countdown.
NOTIFY_RATE_MAX_INLINE_WAIT = env_float("NOTIFY_RATE_MAX_INLINE_WAIT", 0.25, minimum=0)
