"""The REST API, intake and the outbox relay, and batches of route and send work."""

from notify.env import (
    env_bool,
    env_float,
    env_int,
    env_int_or_none,
    env_str,
)

# --- REST API -------------------------------------------------------------------------
REST_FRAMEWORK = {
    # End-user tokens are tried first; they only claim `ut_…` bearer values.
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "notify.api.auth.UserTokenAuthentication",
        "notify.api.auth.ApiKeyAuthentication",
    ],
    # An API key narrowed by scopes reaches only the operations they name.
    "DEFAULT_PERMISSION_CLASSES": [
        "rest_framework.permissions.IsAuthenticated",
        "notify.api.auth.ApiKeyScopes",
    ],
    "DEFAULT_RENDERER_CLASSES": [
        "rest_framework.renderers.JSONRenderer",
        "rest_framework.renderers.BrowsableAPIRenderer",
    ],
    # DRF's JSON parser plus refusals of NUL, lone surrogates, NaN/inf and deep nesting.
    "DEFAULT_PARSER_CLASSES": ["notify.api.parsers.JSONParser"],
    "EXCEPTION_HANDLER": "notify.api.errors.exception_handler",
    # Every operation draws from its caller's token bucket (per API key, per end user).
    "DEFAULT_THROTTLE_CLASSES": ["notify.api.auth.ApiRateThrottle"],
    # Adds the error answers every operation shares, the auth schemes and id constraints.
    "DEFAULT_SCHEMA_CLASS": "notify.api.schema.NotifyAutoSchema",
    "UNAUTHENTICATED_USER": None,
}
SPECTACULAR_SETTINGS = {
    "TITLE": "Notify API",
    "DESCRIPTION": "Events in; in-app, email, push and SMS notifications out.",
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    "COMPONENT_SPLIT_REQUEST": True,
    # Served from the installed sidecar package: no CDN needed.
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "SERVE_PERMISSIONS": ["rest_framework.permissions.AllowAny"],
    "SERVE_AUTHENTICATION": [],
    # Enums stay inline: the enum hook would turn each `{"enum": [...]}` of a rule (e.g.
    # "kind webpush needs endpoint and keys") into a shared component of all the values.
    # Ours adds the links from a created resource to the operations on it.
    "POSTPROCESSING_HOOKS": [
        "notify.api.schema.add_links",
        "stream.schema.add_stream",
    ],
}

# --- Intake and the outbox relay -----------------------------------------------------------
NOTIFY_MAX_BODY_BYTES = env_int("NOTIFY_MAX_BODY_BYTES", 64 * 1024, minimum=1024)
# Request JSON nested deeper than this is refused (400): real payloads are shallow, and
# deep nesting costs recursion in every layer that walks it.
NOTIFY_API_MAX_JSON_DEPTH = env_int("NOTIFY_API_MAX_JSON_DEPTH", 32, minimum=2)
# Lists in request bodies (e.g. feed ids to mark read) hold at most this many items.
NOTIFY_API_MAX_LIST_ITEMS = env_int("NOTIFY_API_MAX_LIST_ITEMS", 1000, minimum=1)
# Rate limits, one token bucket in Redis per API key (every operation it makes; a key's
# own rate in admin wins) and one per end user's token (a browser or app polling its
# feed, count and preferences): over it, 429 with Retry-After.
NOTIFY_API_RATE_PER_SECOND = env_float("NOTIFY_API_RATE_PER_SECOND", 100.0, minimum=0.01)
NOTIFY_API_RATE_BURST = env_int("NOTIFY_API_RATE_BURST", 200, minimum=1)
NOTIFY_USER_RATE_PER_SECOND = env_float("NOTIFY_USER_RATE_PER_SECOND", 5.0, minimum=0.01)
NOTIFY_USER_RATE_BURST = env_int("NOTIFY_USER_RATE_BURST", 30, minimum=1)
# With Redis down the limiter cannot count. Open (the default) lets requests through:
# Redis holds only the buckets and caches, intake needs only PostgreSQL, and a Redis
# outage must not become an API outage. Closed (0) answers 503 with Retry-After
# instead, for deployments that face producers they do not trust.
NOTIFY_API_RATE_LIMIT_FAIL_OPEN = env_bool("NOTIFY_API_RATE_LIMIT_FAIL_OPEN", True)
# Quotas in events, per producer and shared by all its keys (notify/quotas.py): events
# accepted per minute (a token bucket: N/60 per second, bursts up to N), per UTC day,
# and campaign recipients launched per UTC day. A batch counts each of its events, a
# campaign its audience. Unset = no quota (and no Redis work for them); a producer's own
# quota in admin or create_producer wins. Past one: 429 with Retry-After and RateLimit
# headers. Redis down: as NOTIFY_API_RATE_LIMIT_FAIL_OPEN says for the rate limits.
NOTIFY_PRODUCER_EVENTS_PER_MINUTE = env_int_or_none("NOTIFY_PRODUCER_EVENTS_PER_MINUTE", minimum=0)
NOTIFY_PRODUCER_EVENTS_PER_DAY = env_int_or_none("NOTIFY_PRODUCER_EVENTS_PER_DAY", minimum=0)
NOTIFY_PRODUCER_CAMPAIGN_EVENTS_PER_DAY = env_int_or_none(
    "NOTIFY_PRODUCER_CAMPAIGN_EVENTS_PER_DAY", minimum=0
)
NOTIFY_DEFAULT_LOCALE = env_str("NOTIFY_DEFAULT_LOCALE", "en")
# A scheduled notification (send_at) may be at most this far ahead.
NOTIFY_SEND_AT_MAX_DAYS = env_int("NOTIFY_SEND_AT_MAX_DAYS", 90, minimum=1)
# A batch request carries at most this many events, in a body of at most this size.
NOTIFY_BATCH_MAX_EVENTS = env_int("NOTIFY_BATCH_MAX_EVENTS", 1000, minimum=1)
NOTIFY_BATCH_MAX_BODY_BYTES = env_int("NOTIFY_BATCH_MAX_BODY_BYTES", 4 * 1024 * 1024, minimum=1024)
# A campaign launched over the API may carry its audience as a list of user ids
# (NOTIFY_CAMPAIGN_MAX_USER_IDS of them, ~150 characters each): its body may be this large.
NOTIFY_CAMPAIGN_MAX_BODY_BYTES = env_int(
    "NOTIFY_CAMPAIGN_MAX_BODY_BYTES", 16 * 1024 * 1024, minimum=1024
)
# Bodies past those limits get our own 413; this only bounds what Django buffers.
DATA_UPLOAD_MAX_MEMORY_SIZE = (
    max(NOTIFY_MAX_BODY_BYTES, NOTIFY_BATCH_MAX_BODY_BYTES, NOTIFY_CAMPAIGN_MAX_BODY_BYTES) * 2
)
# API keys, their categories, the categories themselves and each user id's recipient id
# are kept in each process for this long (seconds), so that authenticating and reading an
# unread count cost no query. It is the revocation bound: a revoked key, a changed
# category, or an erased person's token reading their count takes effect within it on
# every process (at once on the one that revoked or erased).
NOTIFY_AUTH_CACHE_SECONDS = env_float("NOTIFY_AUTH_CACHE_SECONDS", 5.0, minimum=0)
# The relay publishes at most this many outbox rows per round, and looks for rows even
# without a wake-up this often (a lost NOTIFY, a broker that was away).
NOTIFY_OUTBOX_BATCH = env_int("NOTIFY_OUTBOX_BATCH", 500, minimum=1)
NOTIFY_OUTBOX_POLL_INTERVAL = env_float("NOTIFY_OUTBOX_POLL_INTERVAL", 1.0, minimum=0.05)
# The task the relay publishes outbox rows to: the deliveries app's route task. Named
# here, where the apps are wired together, so that the core names nothing above it.
NOTIFY_OUTBOX_TASK = "deliveries.route"

# --- Batches: route and send many notifications per task ---------------------------------
# A campaign's (`low`) work goes in batches of at most this many: one route task routes
# that many notifications (one lock, one gate read, one write), and one send task per
# channel sends that many deliveries (one claim, one provider session, one record).
NOTIFY_BATCH_SIZE = env_int("NOTIFY_BATCH_SIZE", 200, minimum=1)
# Transactional work (`high`, `medium`) is batched only as it is already queued
# together, never waiting for a batch to fill, and in smaller batches, so that several
# sender threads share a burst.
NOTIFY_BATCH_SIZE_TRANSACTIONAL = env_int("NOTIFY_BATCH_SIZE_TRANSACTIONAL", 25, minimum=1)
# A send batch goes in rounds (claim, send, record) of about this many seconds: a round
# grows while the provider answers fast and shrinks to one message when it is slow, so a
# campaign's pause reaches the rest of a batch within a round. Each round pays a claim, a
# record, a rate-limit round trip and its statement slots whatever its size: at half a
# second a loaded campaign worker's rounds held about ten emails each, and those fixed
# costs were a tenth of its CPU. The first round's size:
NOTIFY_BATCH_ROUND_SECONDS = env_float("NOTIFY_BATCH_ROUND_SECONDS", 2.0, minimum=0.001)
NOTIFY_BATCH_ROUND_START = env_int("NOTIFY_BATCH_ROUND_START", 2, minimum=1)
# A message a provider took before its round was recorded is marked in Redis for this
# long (seconds), so the sweeper settles a killed worker's claim instead of resending it;
# longer than the claim timeout plus the sweeper's interval.
NOTIFY_SENT_MARK_SECONDS = env_int("NOTIFY_SENT_MARK_SECONDS", 3600, minimum=60)
# Low-priority outbox rows (campaigns) go out at most this many per relay round (one
# route batch message), so the high and medium classes are looked at again in between.
NOTIFY_OUTBOX_LOW_BATCH = env_int("NOTIFY_OUTBOX_LOW_BATCH", NOTIFY_BATCH_SIZE, minimum=1)
