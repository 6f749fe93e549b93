"""Which channels are on, their fallback, their limits in templates and rendering, and
the pressure on their providers (rate limits, circuit breakers)."""

import os

from config.settings.email import NOTIFY_EMAIL_ESP
from config.settings.push import FCM_CREDENTIALS, NOTIFY_PUSH_SENDERS, WEBPUSH_VAPID_PRIVATE_KEY
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
NOTIFY_BREAKER_FAILURES = env_int("NOTIFY_BREAKER_FAILURES", 10, minimum=1)
NOTIFY_BREAKER_WINDOW = env_float("NOTIFY_BREAKER_WINDOW", 30.0, minimum=0.1)
NOTIFY_BREAKER_COOLDOWN = env_float("NOTIFY_BREAKER_COOLDOWN", 30.0, minimum=0.1)
# How long a half-open probe may take before another sender may probe instead.
NOTIFY_BREAKER_PROBE_TIMEOUT = env_float("NOTIFY_BREAKER_PROBE_TIMEOUT", 15.0, minimum=0.1)

# --- Channel isolation: each channel's own share of a worker's senders -----------------
# (flow/senders.py, docs/pipeline.md.) A worker process's threads, as
# scripts/worker.sh gives them to Celery (it exports WORKER_CONCURRENCY).
NOTIFY_WORKER_THREADS = env_int("WORKER_CONCURRENCY", 8, minimum=1)
# On these queue classes at most this many of them send for one channel at once, and never
# more than half of them (rounded up), so every other channel keeps the rest. The push
# channels take NOTIFY_PUSH_SENDERS each (give the worker twice as many threads for all of
# them). On the other classes (`low`: a campaign's email is most of its work) a channel
# may use every thread while its provider is fast.
NOTIFY_CHANNEL_ISOLATED_QUEUES = env_list("NOTIFY_CHANNEL_ISOLATED_QUEUES", ["high", "medium"])
# On these queue classes the thread that routes a notification sends its email and SMS
# itself, at once, when the channel has a free sender there (no send message: one broker
# round trip less between routing and sending); otherwise it publishes them. `low` is left
# out: a campaign's route batches go to every sender thread through send messages.
NOTIFY_SEND_AT_ROUTE_QUEUES = env_list("NOTIFY_SEND_AT_ROUTE_QUEUES", ["high", "medium"])
# ...and only while a route batch has at most this many deliveries of the channel (a lone
# login code has one): a burst's bigger batches go to the senders by message, since sending
# them here would hold up the routing of what follows (and with it per-person order).
NOTIFY_SEND_AT_ROUTE_MAX = env_int("NOTIFY_SEND_AT_ROUTE_MAX", 1, minimum=0)
NOTIFY_CHANNEL_SENDERS = {
    "email": env_int("NOTIFY_EMAIL_SENDERS", 4, minimum=1),
    "sms": env_int("NOTIFY_SMS_SENDERS", 4, minimum=1),
    "webpush": NOTIFY_PUSH_SENDERS,
    "fcm": NOTIFY_PUSH_SENDERS,
}
# A channel is slow while its provider calls take longer than this on average (seconds),
# or one provider call has been running longer; while slow it has at most
# NOTIFY_CHANNEL_SLOW_SENDERS, on every class.
NOTIFY_CHANNEL_SLOW_SECONDS = env_float("NOTIFY_CHANNEL_SLOW_SECONDS", 3.0, minimum=0.01)
NOTIFY_CHANNEL_SLOW_SENDERS = env_int("NOTIFY_CHANNEL_SLOW_SENDERS", 2, minimum=1)
# A send that finds its channel's slots taken waits in the worker's memory, without a
# thread, for the next sender of its channel to run it: if the sends ahead of it should
# be done within NOTIFY_CHANNEL_WAIT_MAX seconds and fewer than NOTIFY_CHANNEL_WAITING_MAX
# wait (per channel and class). One that has waited longer goes back to the broker. A
# sender runs waiting sends for at most NOTIFY_CHANNEL_SERVE_MAX seconds, then acks its
# own message (far inside RabbitMQ's consumer timeout, 30 min).
NOTIFY_CHANNEL_WAIT_MAX = env_float("NOTIFY_CHANNEL_WAIT_MAX", 60.0, minimum=0)
NOTIFY_CHANNEL_WAITING_MAX = env_int("NOTIFY_CHANNEL_WAITING_MAX", 200, minimum=0)
NOTIFY_CHANNEL_SERVE_MAX = env_float("NOTIFY_CHANNEL_SERVE_MAX", 120.0, minimum=1)
# A send that cannot wait there is published again with a countdown of about its wait
# (behind the line and the sends deferred before it), at least NOTIFY_CHANNEL_DEFER and
# at most NOTIFY_CHANNEL_DEFER_MAX seconds: far inside RabbitMQ's consumer timeout (a
# countdown on a classic queue waits in the worker), and what a deferred send may wait
# beyond its turn once the provider is fast again.
NOTIFY_CHANNEL_DEFER = env_float("NOTIFY_CHANNEL_DEFER", 1.0, minimum=0.1)
NOTIFY_CHANNEL_DEFER_MAX = env_float("NOTIFY_CHANNEL_DEFER_MAX", 300.0, minimum=1)
