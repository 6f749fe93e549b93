"""Campaigns: fan-out, progress, audiences."""

from notify.env import (
    env_float,
    env_int,
)

# --- Campaigns -----------------------------------------------------------------------
# Recipients fanned out per batch: one INSERT … SELECT for their notifications, one for
# their outbox rows, then the fan-out task yields (it re-publishes itself on `low`).
NOTIFY_CAMPAIGN_BATCH_SIZE = env_int("NOTIFY_CAMPAIGN_BATCH_SIZE", 2000, minimum=1)
# ...and this many while login codes are in flight (flow/priority.py): a batch is one
# transaction whose database work runs beside them, so it is kept short then.
NOTIFY_CAMPAIGN_BUSY_BATCH_SIZE = env_int("NOTIFY_CAMPAIGN_BUSY_BATCH_SIZE", 200, minimum=1)
# A campaign's admin page refreshes its progress this often (seconds) while it can change.
NOTIFY_CAMPAIGN_PROGRESS_POLL = env_float("NOTIFY_CAMPAIGN_PROGRESS_POLL", 2.0, minimum=0.1)
# A user-id audience given in one request holds at most this many ids.
NOTIFY_CAMPAIGN_MAX_USER_IDS = env_int("NOTIFY_CAMPAIGN_MAX_USER_IDS", 100_000, minimum=1)
# A CSV uploaded in admin holds at most this many user ids (read as a stream, loaded
# with COPY; never held in memory).
NOTIFY_CAMPAIGN_MAX_UPLOAD_IDS = env_int("NOTIFY_CAMPAIGN_MAX_UPLOAD_IDS", 1_000_000, minimum=1)
# The fan-out's own message priority: below a first attempt's, so the route tasks of one
# batch go before the next batch is made (the campaign paces itself to routing).
NOTIFY_CAMPAIGN_FAN_OUT_PRIORITY = env_int("NOTIFY_CAMPAIGN_FAN_OUT_PRIORITY", 1, minimum=0)
# Beat: how often scheduled campaigns are started, and after how long without a batch a
# running campaign's fan-out counts as lost (its message or worker) and is published again.
NOTIFY_CAMPAIGN_START_INTERVAL = env_float("NOTIFY_CAMPAIGN_START_INTERVAL", 5.0, minimum=1)
NOTIFY_CAMPAIGN_STALL_SECONDS = env_float("NOTIFY_CAMPAIGN_STALL_SECONDS", 600.0, minimum=1)
# Local-time delivery waits until each person's chosen wall-clock time; the wait is
# divided by this. 1 in production: a larger value compresses time for tests and demos
# (3600 makes an hour a second), never for real audiences.
NOTIFY_CAMPAIGN_TIME_SCALE = env_float("NOTIFY_CAMPAIGN_TIME_SCALE", 1.0, minimum=1)
# A campaign's estimate (dry run, launch page) asks the gate about at most about this many
# members, in the request (its reads grow with it): past it, an even sample, its counts
# scaled to the audience.
NOTIFY_CAMPAIGN_ESTIMATE_MEMBERS = env_int("NOTIFY_CAMPAIGN_ESTIMATE_MEMBERS", 20_000, minimum=100)
