"""Status webhooks out: producers' endpoints told of their deliveries' outcomes."""

from notify.env import env_float, env_float_list, env_int, env_list

# --- Status webhooks out ------------------------------------------------------------------
# Each event is posted to a producer's endpoint from the `low` queue (a slow receiver
# never holds a login code), signed as the Standard Webhooks specification says.
# Waits between tries of one event (seconds, each jittered by NOTIFY_RETRY_JITTER): the
# last try is made about 35 h after the first, so a receiver down for a day still gets
# everything. After the last, the event is `failed` (kept, visible in admin, and
# re-delivered on request: POST /v1/webhooks/{id}/redeliver or the admin action).
NOTIFY_WEBHOOK_RETRY_DELAYS = env_float_list(
    "NOTIFY_WEBHOOK_RETRY_DELAYS", [5, 300, 1800, 7200, 18000, 36000, 36000, 28800]
)
# An endpoint whose posts have all failed for this long (seconds), over at least
# NOTIFY_WEBHOOK_DISABLE_FAILURES tries in a row, is disabled with the reason; its owner
# re-enables it in admin or through the API, and what waited is posted then.
NOTIFY_WEBHOOK_DISABLE_AFTER = env_float("NOTIFY_WEBHOOK_DISABLE_AFTER", 5 * 24 * 3600.0, minimum=0)
NOTIFY_WEBHOOK_DISABLE_FAILURES = env_int("NOTIFY_WEBHOOK_DISABLE_FAILURES", 20, minimum=1)
# Egress: an endpoint must be https and resolve to public addresses only; these origins
# (`scheme://host[:port]`, listed exactly) may be http or private (a receiver on the
# operator's own network, or the tests' loopback receiver).
NOTIFY_WEBHOOK_ALLOWED_PRIVATE_ORIGINS = env_list("NOTIFY_WEBHOOK_ALLOWED_PRIVATE_ORIGINS", [])
# One post's whole deadline (connect, send, read; seconds), and how much of the answer
# is read (it is kept on the attempt row).
NOTIFY_WEBHOOK_CALL_DEADLINE = env_float("NOTIFY_WEBHOOK_CALL_DEADLINE", 10.0, minimum=0.1)
NOTIFY_WEBHOOK_MAX_RESPONSE_BYTES = env_int("NOTIFY_WEBHOOK_MAX_RESPONSE_BYTES", 4096, minimum=64)
# Whether anyone subscribes to an event type is kept in each process this long
# (seconds), so an outcome round with no subscriber runs no statement for webhooks. A
# new subscription may miss events for up to this long.
NOTIFY_WEBHOOK_SUBSCRIPTION_CACHE_SECONDS = env_float(
    "NOTIFY_WEBHOOK_SUBSCRIPTION_CACHE_SECONDS", 5.0, minimum=0
)
# Events per post message (one endpoint's events of one round travel together).
NOTIFY_WEBHOOK_POST_BATCH = env_int("NOTIFY_WEBHOOK_POST_BATCH", 100, minimum=1)
# A retry this soon (seconds) is published with a countdown; a longer wait is the
# sweep's: it re-queues events whose time came (and claims older than the deadline
# plus NOTIFY_WEBHOOK_SWEEP_GRACE, of a lost worker), up to NOTIFY_WEBHOOK_SWEEP_BATCH a run.
NOTIFY_WEBHOOK_COUNTDOWN_MAX = env_float("NOTIFY_WEBHOOK_COUNTDOWN_MAX", 300.0, minimum=0)
# A post message may arrive this much (seconds) before its event's time (timer and clock
# granularity) and still take it, rather than leave it to the sweep.
NOTIFY_WEBHOOK_CLAIM_EARLY = env_float("NOTIFY_WEBHOOK_CLAIM_EARLY", 1.0, minimum=0)
NOTIFY_WEBHOOK_SWEEP_INTERVAL = env_float("NOTIFY_WEBHOOK_SWEEP_INTERVAL", 10.0, minimum=0.5)
NOTIFY_WEBHOOK_SWEEP_GRACE = env_float("NOTIFY_WEBHOOK_SWEEP_GRACE", 30.0, minimum=0)
NOTIFY_WEBHOOK_SWEEP_BATCH = env_int("NOTIFY_WEBHOOK_SWEEP_BATCH", 1000, minimum=1)
# Posted and failed events (and their attempts) are kept this many days.
NOTIFY_WEBHOOK_RETENTION_DAYS = env_int("NOTIFY_WEBHOOK_RETENTION_DAYS", 30, minimum=1)
# While an endpoint is disabled its events are still written and wait for it: at most
# this many per endpoint (the sweep drops the oldest first, and any older than
# NOTIFY_RETENTION_DAYS; /metrics counts the drops), delivered in order once re-enabled.
NOTIFY_WEBHOOK_DISABLED_BACKLOG_MAX = env_int(
    "NOTIFY_WEBHOOK_DISABLED_BACKLOG_MAX", 10_000, minimum=0
)
# Failed events one re-delivery (API or admin) queues at most, the oldest first; the
# answer says whether more are left for another call.
NOTIFY_WEBHOOK_REDELIVER_MAX = env_int("NOTIFY_WEBHOOK_REDELIVER_MAX", 10_000, minimum=1)
# Endpoints one producer may register.
NOTIFY_WEBHOOK_MAX_ENDPOINTS = env_int("NOTIFY_WEBHOOK_MAX_ENDPOINTS", 10, minimum=1)
# A rotated-out secret keeps signing (beside the new one) this long, so a receiver can
# switch over without dropping events (seconds).
NOTIFY_WEBHOOK_SECRET_OVERLAP = env_float("NOTIFY_WEBHOOK_SECRET_OVERLAP", 24 * 3600.0, minimum=0)
# The post messages' priority within `low` (campaign first sends are
# NOTIFY_PRIORITY_FIRST_ATTEMPT): a campaign goes first, webhooks fill the gaps.
NOTIFY_WEBHOOK_PRIORITY = env_int("NOTIFY_WEBHOOK_PRIORITY", 3, minimum=0)
# Attempts shown on an endpoint's admin page (all of them are in Webhook attempts).
NOTIFY_WEBHOOK_ADMIN_ATTEMPTS = env_int("NOTIFY_WEBHOOK_ADMIN_ATTEMPTS", 20, minimum=1)
