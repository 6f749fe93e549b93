"""History: monthly partitions, retention, archive."""

from config.settings.base import BASE_DIR
from notify.env import (
    env_float,
    env_int,
    env_str,
)

# --- History: monthly partitions, retention, archive --------------------------------------
# Notifications, deliveries, attempts and feed entries are partitioned by UTC month of the
# notification's acceptance; this many months ahead always exist (docs/history.md). One
# is enough (beat checks hourly; a row past the last month waits in the default partition
# and is moved), and each more costs every statement over these tables: PostgreSQL plans
# each partition with its indexes (five partitions instead of three doubled the planning
# of the sender's claim, some 6 ms against 3).
NOTIFY_PARTITIONS_AHEAD = env_int("NOTIFY_PARTITIONS_AHEAD", 1, minimum=1)
# Months that ended more than this many days ago are archived, verified and dropped.
NOTIFY_RETENTION_DAYS = env_int("NOTIFY_RETENTION_DAYS", 90, minimum=1)
# Where archived months go: a local directory, or any fsspec URL (s3://bucket/notify, …).
NOTIFY_ARCHIVE_URL = env_str("NOTIFY_ARCHIVE_URL", str(BASE_DIR / "var" / "archive"))
# Rows per batch when a month is written to (or read from) the archive: bounds memory.
NOTIFY_ARCHIVE_BATCH_ROWS = env_int("NOTIFY_ARCHIVE_BATCH_ROWS", 10_000, minimum=100)
# Seconds retention waits for the lock that dropping a month's partitions needs; past it
# the month is tried again on the next run rather than holding up intake.
NOTIFY_RETENTION_DROP_LOCK_TIMEOUT = env_float(
    "NOTIFY_RETENTION_DROP_LOCK_TIMEOUT", 10.0, minimum=0.1
)
# A month restored for support is dropped again (not re-archived) after this many days.
NOTIFY_RESTORE_KEEP_DAYS = env_int("NOTIFY_RESTORE_KEEP_DAYS", 7, minimum=1)
# Beat: how often partitions are ensured and retention runs.
NOTIFY_HISTORY_MAINTENANCE_INTERVAL = env_float(
    "NOTIFY_HISTORY_MAINTENANCE_INTERVAL", 3600.0, minimum=1
)
