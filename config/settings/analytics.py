"""Delivery analytics: events written beside each outcome, shipped to ClickHouse."""

from config.settings.base import BASE_DIR
from notify.env import env_bool, env_float, env_int, env_str, secret_text

# --- Analytics: delivery events, the shipper, the ClickHouse store ---------------------------
# Every counted change writes an event row in its own transaction (one statement per
# round), and the `analytics` process ships them to the store. On by default, as the
# reports need it; off, no event is written and the rounds run no statement for it.
NOTIFY_ANALYTICS_ENABLED = env_bool("NOTIFY_ANALYTICS_ENABLED", True)
# A ClickHouse server (or a cluster's load balancer) by URL, e.g.
# http://user:password@clickhouse:8123 (a secret: inline or a file's path); empty:
# ClickHouse embedded (chDB) in the `analytics` process, its data in NOTIFY_ANALYTICS_DATA_DIR.
NOTIFY_ANALYTICS_CLICKHOUSE_URL = secret_text("NOTIFY_ANALYTICS_CLICKHOUSE_URL").strip()
NOTIFY_ANALYTICS_DATA_DIR = env_str(
    "NOTIFY_ANALYTICS_DATA_DIR", str(BASE_DIR / "var" / "analytics")
)
# Embedded only: where the `analytics` process answers the web processes' report queries
# (one process may open the data directory, so the others ask it). Empty: this process
# opens the store itself (one-process use: a shell, the tests' own process).
NOTIFY_ANALYTICS_READER_ADDRESS = env_str("NOTIFY_ANALYTICS_READER_ADDRESS", "127.0.0.1:8125")
# Events per shipped batch: one COPY out of PostgreSQL streamed into one INSERT into the
# store. Each INSERT makes a part in the events table and in each rollup, so fewer, larger
# ones cost the store less (20 of 50,000 rows take it about half again the CPU of one of
# 1,000,000; 5 of 200,000 no more); the rows stream through, never held in Python.
NOTIFY_ANALYTICS_BATCH = env_int("NOTIFY_ANALYTICS_BATCH", 200_000, minimum=100)
# Seconds the shipper waits after a batch that did not fill (nothing, or fewer events than
# NOTIFY_ANALYTICS_BATCH, waited): the floor of the store's lag, and what keeps its inserts
# few while a pipeline writes events. Each INSERT makes a part in every table, about 13 ms
# of the store's CPU whatever its size (against 2 µs a row), plus the merges after.
NOTIFY_ANALYTICS_POLL_INTERVAL = env_float("NOTIFY_ANALYTICS_POLL_INTERVAL", 3.0, minimum=0.05)
# Detail rows are kept this many days in the store (a TTL), like the pipeline's own
# history before it is archived; the daily rollups are kept for good.
NOTIFY_ANALYTICS_DETAIL_DAYS = env_int("NOTIFY_ANALYTICS_DETAIL_DAYS", 400, minimum=1)
