"""The store's tables, the same on chDB and on a server.

`events`: one row per event (MergeTree, a partition per month, kept
NOTIFY_ANALYTICS_DETAIL_DAYS by a TTL). Two rollups fed by materialized views as rows
arrive, kept for good and holding no person: `daily` (per day, producer, category,
channel, provider, kind and reason, with latency quantile states) and `campaigns` (per
producer, campaign, channel, kind and reason). Reports read the rollups, so a report
over millions of events reads a few thousand rows, and an erasure (which deletes detail
rows) changes no count.
"""

from __future__ import annotations

from django.conf import settings

DATABASE = "notify_analytics"
EVENTS = f"{DATABASE}.events"
DAILY = f"{DATABASE}.daily"
CAMPAIGNS = f"{DATABASE}.campaigns"
# The columns as the shipper's COPY writes them, in order.
EVENT_COLUMNS = (
    "event_id",
    "kind",
    "occurred_at",
    "producer_id",
    "campaign_id",
    "category",
    "channel",
    "provider",
    "reason",
    "delivery_id",
    "notification_id",
    "person",
    "latency_ms",
)
# The latency quantiles every report gives (median, 90th, 99th).
QUANTILES = "0.5, 0.9, 0.99"


def schema_statements() -> list[str]:
    """CREATE … IF NOT EXISTS for every table and view, in order."""
    days = settings.NOTIFY_ANALYTICS_DETAIL_DAYS
    return [
        f"CREATE DATABASE IF NOT EXISTS {DATABASE}",
        f"""CREATE TABLE IF NOT EXISTS {EVENTS} (
            event_id UInt64,
            kind LowCardinality(String),
            occurred_at DateTime64(3, 'UTC'),
            producer_id UInt64,
            campaign_id UInt64,
            category LowCardinality(String),
            channel LowCardinality(String),
            provider LowCardinality(String),
            reason LowCardinality(String),
            delivery_id UInt64,
            notification_id UUID,
            person String,
            latency_ms Int64,
            INDEX event_ids event_id TYPE minmax GRANULARITY 1,
            INDEX persons person TYPE bloom_filter GRANULARITY 4
        ) ENGINE = MergeTree
        PARTITION BY toYYYYMM(occurred_at)
        ORDER BY (producer_id, campaign_id, channel, kind, occurred_at)
        TTL toDateTime(occurred_at) + INTERVAL {days} DAY""",
        f"""CREATE TABLE IF NOT EXISTS {DAILY} (
            day Date,
            producer_id UInt64,
            category LowCardinality(String),
            channel LowCardinality(String),
            provider LowCardinality(String),
            kind LowCardinality(String),
            reason LowCardinality(String),
            events SimpleAggregateFunction(sum, UInt64),
            latency AggregateFunction(quantilesIf({QUANTILES}), Int64, UInt8)
        ) ENGINE = AggregatingMergeTree
        PARTITION BY toYYYYMM(day)
        ORDER BY (producer_id, day, category, channel, provider, kind, reason)""",
        f"""CREATE MATERIALIZED VIEW IF NOT EXISTS {DAILY}_mv TO {DAILY} AS
        SELECT toDate(occurred_at) AS day, producer_id, category, channel, provider, kind,
               reason, toUInt64(count()) AS events,
               quantilesIfState({QUANTILES})(latency_ms, toUInt8(latency_ms >= 0)) AS latency
          FROM {EVENTS}
         GROUP BY day, producer_id, category, channel, provider, kind, reason""",
        f"""CREATE TABLE IF NOT EXISTS {CAMPAIGNS} (
            producer_id UInt64,
            campaign_id UInt64,
            channel LowCardinality(String),
            kind LowCardinality(String),
            reason LowCardinality(String),
            events SimpleAggregateFunction(sum, UInt64)
        ) ENGINE = AggregatingMergeTree
        ORDER BY (producer_id, campaign_id, channel, kind, reason)""",
        f"""CREATE MATERIALIZED VIEW IF NOT EXISTS {CAMPAIGNS}_mv TO {CAMPAIGNS} AS
        SELECT producer_id, campaign_id, channel, kind, reason, toUInt64(count()) AS events
          FROM {EVENTS}
         WHERE campaign_id != 0
         GROUP BY producer_id, campaign_id, channel, kind, reason""",
    ]


def schema_ensure(store) -> None:
    """Create whatever is missing (the shipper does, at start)."""
    for statement in schema_statements():
        store.command(statement)


def store_truncate(store) -> None:
    """Empty every table (the tests' clean slate; an operator's reset)."""
    for table in (EVENTS, DAILY, CAMPAIGNS):
        store.command(f"TRUNCATE TABLE IF EXISTS {table}")
