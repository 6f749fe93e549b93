"""What a recipient decides and sees: preferences, consent, quiet hours, caps, user
tokens, the feed and its unread counter."""

from config.settings.base import DEBUG
from notify.env import (
    env_bool,
    env_float,
    env_int,
    env_list,
    env_origins,
    env_str,
)

# --- Recipients between producers (docs/producers.md) ---------------------------------------
# Off (the default): recipients are shared by every producer, and each change of a person's
# email or phone is recorded with the key that made it. On: a producer's keys reach only the
# recipients it registered or was granted in admin (contact data, tokens, preferences,
# devices, feed, stream, erasure of a registered person).
NOTIFY_RECIPIENTS_OWNED = env_bool("NOTIFY_RECIPIENTS_OWNED", False)

# --- Preferences, consent, quiet hours, caps, user tokens ----------------------------------
# Unsubscribe links must keep working in old emails: two years by default.
NOTIFY_UNSUBSCRIBE_TOKEN_MAX_AGE = env_int(
    "NOTIFY_UNSUBSCRIBE_TOKEN_MAX_AGE", 2 * 365 * 24 * 3600, minimum=1
)
NOTIFY_USER_TOKEN_TTL_SECONDS = env_int("NOTIFY_USER_TOKEN_TTL_SECONDS", 3600, minimum=1)
# --- Preference center (the hosted page behind a signed link) --------------------------
# A link opens every setting of one person, so it lives shorter than an unsubscribe link
# (which can only turn things off): 30 days by default, counted from when it was minted.
NOTIFY_PREFERENCE_CENTER_LINK_MAX_AGE = env_int(
    "NOTIFY_PREFERENCE_CENTER_LINK_MAX_AGE", 30 * 24 * 3600, minimum=1
)
# Languages the page offers (language tags); a recipient's own other tag is kept offered.
NOTIFY_PREFERENCE_CENTER_LANGUAGES = env_list(
    "NOTIFY_PREFERENCE_CENTER_LANGUAGES", ["en", "de", "es", "fr", "ru"]
)
# Default quiet window in the recipient's local time (HH:MM); per recipient in admin.
NOTIFY_QUIET_HOURS_START = env_str("NOTIFY_QUIET_HOURS_START", "21:00")
NOTIFY_QUIET_HOURS_END = env_str("NOTIFY_QUIET_HOURS_END", "09:00")
NOTIFY_MARKETING_DAILY_CAP = env_int("NOTIFY_MARKETING_DAILY_CAP", 3, minimum=1)
NOTIFY_CONSENT_TEXT_VERSION = env_str("NOTIFY_CONSENT_TEXT_VERSION", "v1")
NOTIFY_DEFERRED_RELEASE_INTERVAL = env_float("NOTIFY_DEFERRED_RELEASE_INTERVAL", 30.0, minimum=1)
NOTIFY_DEFERRED_RELEASE_BATCH = env_int("NOTIFY_DEFERRED_RELEASE_BATCH", 500, minimum=1)
# --- Feed and unread counter (R-U) ----------------------------------------------------
NOTIFY_FEED_PAGE_SIZE = env_int("NOTIFY_FEED_PAGE_SIZE", 20, minimum=1)
NOTIFY_FEED_MAX_PAGE_SIZE = env_int("NOTIFY_FEED_MAX_PAGE_SIZE", 100, minimum=1)
NOTIFY_UNREAD_RECONCILE_INTERVAL = env_float("NOTIFY_UNREAD_RECONCILE_INTERVAL", 300.0, minimum=1)
# Recipients whose feed changed within this window are reconciled each run.
NOTIFY_UNREAD_RECONCILE_WINDOW = env_float("NOTIFY_UNREAD_RECONCILE_WINDOW", 3600.0, minimum=1)
# --- The inbox component's demo page ------------------------------------------------------
# /inbox/demo shows <notify-inbox> for one recipient and mints that person's user tokens
# for anyone who asks: a development aid, on only with DEBUG unless set explicitly.
NOTIFY_INBOX_DEMO = env_bool("NOTIFY_INBOX_DEMO", DEBUG)
NOTIFY_INBOX_DEMO_USER = env_str("NOTIFY_INBOX_DEMO_USER", "demo-user")
# Where the demo page's inbox finds the live stream when it is not on the page's own
# origin (`make run` serves it from its own process and port); empty: the same origin.
NOTIFY_INBOX_DEMO_STREAM_BASE = env_str("NOTIFY_INBOX_DEMO_STREAM_BASE", "")
# Browser origins (scheme://host[:port], or *) whose pages may call the end-user API: the
# product pages that embed the inbox from another origin. None by default.
NOTIFY_INBOX_ALLOWED_ORIGINS = env_origins("NOTIFY_INBOX_ALLOWED_ORIGINS")
# How long a browser may reuse a preflight's answer, in seconds.
NOTIFY_INBOX_CORS_MAX_AGE = env_int("NOTIFY_INBOX_CORS_MAX_AGE", 600, minimum=0)
