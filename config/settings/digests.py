"""Digests and delays with a condition (docs/digests.md)."""

from notify.env import env_float, env_int

# --- Digest windows and delays if unread ----------------------------------------------
# The longest digest window a category may set on a channel (seconds; a day by default),
# at save, in the API and in admin. A delay if unread is bounded by the channel's deadline
# instead (NOTIFY_CHANNEL_DEADLINE_SECONDS and the category's TTL).
NOTIFY_DIGEST_WINDOW_MAX_SECONDS = env_int("NOTIFY_DIGEST_WINDOW_MAX_SECONDS", 86400, minimum=1)
# How often beat closes the digest windows that are due (seconds). A window that opens
# also publishes a countdown to its own close when it is at most
# NOTIFY_DIGEST_COUNTDOWN_MAX away (longer waits are the sweep's alone, see
# docs/retries-and-delays.md on the consumer timeout); so the sweep is the safety net.
NOTIFY_DIGEST_CLOSE_INTERVAL = env_float("NOTIFY_DIGEST_CLOSE_INTERVAL", 10.0, minimum=0.1)
NOTIFY_DIGEST_COUNTDOWN_MAX = env_float("NOTIFY_DIGEST_COUNTDOWN_MAX", 300.0, minimum=0)
# A close that found a due window locked (a route was filing an event in it) looks
# again after this many seconds instead of waiting for beat's next run.
NOTIFY_DIGEST_RECHECK = env_float("NOTIFY_DIGEST_RECHECK", 1.0, minimum=0.05)
# Windows closed per statement (the close costs the same few statements for them all).
NOTIFY_DIGEST_CLOSE_BATCH = env_int("NOTIFY_DIGEST_CLOSE_BATCH", 200, minimum=1)
# The most events one digest lists for its template (the count says how many there were).
NOTIFY_DIGEST_EVENTS_MAX = env_int("NOTIFY_DIGEST_EVENTS_MAX", 100, minimum=1)
# A scale for every category's digest window and delay (1 = as the category says): a
# test or a demo shortens them all at once without editing categories.
NOTIFY_DIGEST_TIME_SCALE = env_float("NOTIFY_DIGEST_TIME_SCALE", 1.0, minimum=0.0001)
# How long the live stream remembers which feed entries it wrote to a person (seconds):
# a delay if unread ends unsent (`skipped_read`, reason `seen_live`) when the entry was
# written to one of the person's streams within it. Keep it above the longest delay.
NOTIFY_FEED_SEEN_TTL = env_int("NOTIFY_FEED_SEEN_TTL", 86400, minimum=1)
