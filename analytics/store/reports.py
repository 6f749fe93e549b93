"""Reports read from the store's rollups, each for one producer only.

`as_of` comes from PostgreSQL: every event older than the oldest one still queued is
in the store, so a report is complete up to then (now, when nothing waits).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime

from django.utils import timezone

from analytics.events import queued_oldest_at
from analytics.models import EventKind
from analytics.store.schema import CAMPAIGNS, DAILY, EVENTS, QUANTILES

# What a report may group deliveries by (the rollup's columns).
GROUPS = ("day", "category", "channel", "provider")
# Counted per channel in a campaign report, in this order.
CAMPAIGN_COUNTS = (
    EventKind.ACCEPTED,
    EventKind.SUPPRESSED,
    EventKind.DIGESTED,
    EventKind.SENT,
    EventKind.DELIVERED,
    EventKind.REACHED,
    EventKind.FAILED,
    EventKind.BOUNCED,
    EventKind.COMPLAINED,
    EventKind.OPENED,
    EventKind.CLICKED,
    EventKind.UNSUBSCRIBED,
    EventKind.READ,
)
# The latencies a deliveries report gives: accepted → handed to the provider (on
# `delivered`), handed over → reached the person (on `reached`).
LATENCIES = {"accepted_to_provider": EventKind.DELIVERED, "provider_to_reached": EventKind.REACHED}


@dataclass(frozen=True)
class Freshness:
    as_of: datetime
    lag_seconds: float


def store_freshness() -> Freshness:
    """Up to when the store is complete, and how far behind now that is."""
    now = timezone.now()
    oldest = queued_oldest_at()
    as_of = min(oldest, now) if oldest else now
    return Freshness(as_of=as_of, lag_seconds=max((now - as_of).total_seconds(), 0.0))


def campaign_report(*, store, producer_id: int, campaign_id: int) -> dict[str, dict]:
    """Per channel: each count of `CAMPAIGN_COUNTS`, with `suppressed` and `failed` also
    by reason (`suppressed_by_reason`, `failed_by_reason`)."""
    rows = store.query(
        f"SELECT channel, kind, reason, sum(events) FROM {CAMPAIGNS}"
        " WHERE producer_id = {producer:UInt64} AND campaign_id = {campaign:UInt64}"
        " GROUP BY channel, kind, reason",
        {"producer": producer_id, "campaign": campaign_id},
    )
    channels: dict[str, dict] = {}
    for channel, kind, reason, count in rows:
        report = channels.setdefault(
            channel,
            {
                **{str(k): 0 for k in CAMPAIGN_COUNTS},
                "suppressed_by_reason": {},
                "failed_by_reason": {},
            },
        )
        if kind not in report:
            continue
        report[kind] += int(count)
        if kind in (EventKind.SUPPRESSED, EventKind.FAILED):
            by_reason = report[f"{kind}_by_reason"]
            by_reason[reason] = by_reason.get(reason, 0) + int(count)
    return dict(sorted(channels.items()))


def deliveries_report(
    *, store, producer_id: int, start: date, end: date, group_by: tuple[str, ...]
) -> list[dict]:
    """Counts by event kind and latency percentiles (milliseconds), from `start` to `end`
    (days, both included), per combination of `group_by` (a subset of `GROUPS`)."""
    groups = [g for g in GROUPS if g in group_by]
    columns = "".join(f"{g}, " for g in groups)
    rows = store.query(
        f"SELECT {columns}kind, sum(events), quantilesIfMerge({QUANTILES})(latency)"
        f" FROM {DAILY}"
        " WHERE producer_id = {producer:UInt64} AND day >= {start:Date} AND day <= {end:Date}"
        f" GROUP BY {columns}kind ORDER BY {columns}kind",
        {"producer": producer_id, "start": start.isoformat(), "end": end.isoformat()},
    )
    out: dict[tuple, dict] = {}
    for row in rows:
        key = tuple(str(v) for v in row[: len(groups)])
        kind, count, quantiles = row[len(groups) :]
        entry = out.setdefault(
            key, {**dict(zip(groups, key, strict=True)), "counts": {}, "latency_ms": {}}
        )
        entry["counts"][kind] = int(count)
        for name, latency_kind in LATENCIES.items():
            if kind == latency_kind and int(count):
                p50, p90, p99 = (round(float(q)) for q in quantiles)
                entry["latency_ms"][name] = {"p50": p50, "p90": p90, "p99": p99}
    return list(out.values())


# The most events one history page holds.
HISTORY_PAGE_MAX = 200


def person_history(
    *, store, producer_id: int | None, person: str, before: datetime, before_id: int, limit: int
) -> list[dict]:
    """The person's events from this producer (every producer's when `producer_id` is
    None: support's page) before (`before`, `before_id`), newest first: the detail rows,
    kept NOTIFY_ANALYTICS_DETAIL_DAYS (longer than PostgreSQL keeps deliveries). Each
    has `cursor`, where the page after it starts."""
    producer = "producer_id = {producer:UInt64} AND " if producer_id is not None else ""
    rows = store.query(
        "SELECT toString(occurred_at), kind, channel, category, provider, reason, delivery_id,"
        f" toString(notification_id), event_id, producer_id FROM {EVENTS}"
        f" WHERE {producer}person = {{person:String}}"
        " AND (occurred_at, event_id)"
        " < (parseDateTime64BestEffort({before:String}, 3, 'UTC'), {before_id:UInt64})"
        " ORDER BY occurred_at DESC, event_id DESC LIMIT {limit:UInt32}",
        {
            **({"producer": producer_id} if producer_id is not None else {}),
            "person": person,
            "before": before.isoformat(),
            "before_id": before_id,
            "limit": min(limit, HISTORY_PAGE_MAX),
        },
    )
    names = ("occurred_at", "kind", "channel", "category", "provider", "reason")

    def _epoch_ms(text: str) -> int:
        moment = datetime.fromisoformat(text).replace(tzinfo=UTC)
        return round(moment.timestamp() * 1000)

    return [
        {
            **dict(zip(names, row[:6], strict=True)),
            "delivery_id": int(row[6]),
            "notification_id": row[7],
            "producer_id": int(row[9]),
            "cursor": f"{_epoch_ms(row[0])}-{int(row[8])}",
        }
        for row in rows
    ]
