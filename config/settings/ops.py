"""Operations: support pages, health, readiness and metrics (with the metrics sources
of the apps above the one that serves /metrics)."""

from notify.env import (
    env_float,
    env_float_list,
    env_int,
    secret_text,
)

# --- Support pages -------------------------------------------------------------------------
NOTIFY_SUPPORT_TIMELINE_PAGE_SIZE = env_int("NOTIFY_SUPPORT_TIMELINE_PAGE_SIZE", 25, minimum=1)

# --- Operations: health, readiness, metrics ------------------------------------------------
# Bearer token for GET /metrics. Empty: /metrics answers only requests from loopback
# (a scraper on the same host or a sidecar); any other client gets 403.
NOTIFY_METRICS_TOKEN = secret_text("NOTIFY_METRICS_TOKEN").strip()
# Each dependency check in /readyz (and each source read by /metrics) gives up after this.
NOTIFY_OPS_CHECK_TIMEOUT = env_float("NOTIFY_OPS_CHECK_TIMEOUT", 1.0, minimum=0.05)
# Upper bounds (seconds) of the event→delivery latency histogram buckets.
NOTIFY_METRICS_LATENCY_BUCKETS = env_float_list(
    "NOTIFY_METRICS_LATENCY_BUCKETS", [0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0, 1800.0, 3600.0]
)
# The latency histogram covers deliveries finished within this window, so a scrape
# reads a bounded slice of the table instead of all history.
NOTIFY_METRICS_LATENCY_WINDOW = env_float("NOTIFY_METRICS_LATENCY_WINDOW", 3600.0, minimum=1)
# Beat folds what changed into the metrics rollups this often (seconds); a scrape reads
# the rollups plus what changed since, so this bounds the work of a scrape.
NOTIFY_METRICS_FOLD_INTERVAL = env_float("NOTIFY_METRICS_FOLD_INTERVAL", 15.0, minimum=1)
# Rows per fold statement, and at most this many per run (the rest waits for the next).
NOTIFY_METRICS_FOLD_BATCH = env_int("NOTIFY_METRICS_FOLD_BATCH", 2000, minimum=1)
NOTIFY_METRICS_FOLD_LIMIT = env_int("NOTIFY_METRICS_FOLD_LIMIT", 200_000, minimum=1)
# Sources /metrics reads besides the database, broker and Redis ones, by dotted path:
# apps above the one that serves /metrics report here without it importing them.
NOTIFY_METRICS_SOURCES = {
    "history": "history.metrics.history_metrics",
    "webhooks": "webhooks.metrics.webhook_metrics",
    "analytics": "analytics.metrics.analytics_metrics",
}
