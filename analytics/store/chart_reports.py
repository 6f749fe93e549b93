"""Reports the admin's chart pages read besides `reports.py`'s: each for one producer only.

- `provider_trends`: per day and provider, the latency percentiles and the counts a
  failure rate needs, from the `daily` rollup.
- `campaign_sends`: a campaign's tries at the provider per hour and channel. The
  `campaigns` rollup keeps no time, so this reads the detail rows, but only the
  campaign's `sent` rows: the table is ordered by (producer, campaign, channel, kind,
  time), so the read is a range of that key, not a scan. Detail rows are kept
  NOTIFY_ANALYTICS_DETAIL_DAYS; a campaign older than that shows no sends over time
  (its funnel, from the rollup, stays).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date

from analytics.models import EventKind
from analytics.store.schema import DAILY, EVENTS

# The percentiles the provider chart draws. The rollup keeps a quantile *state* (a
# sample), so any levels can be read from it, not only the ones it was written with.
PROVIDER_PERCENTILES = ("p50", "p95", "p99")
_LEVELS = "0.5, 0.95, 0.99"
# The latencies a provider chart may show, as in `reports.LATENCIES`: the event that
# carries each.
PROVIDER_LATENCIES = {
    "accepted_to_provider": EventKind.DELIVERED,
    "provider_to_reached": EventKind.REACHED,
}
# What a failure rate counts: deliveries that ended failed out of those that ended
# (handed over or failed).
_ENDED = (EventKind.DELIVERED, EventKind.FAILED)


@dataclass(frozen=True)
class ProviderDay:
    """One provider on one day: latency percentiles (ms, None without a latency that
    day), and the deliveries that ended handed over and failed."""

    day: str
    provider: str
    latency_ms: dict[str, int | None]
    delivered: int
    failed: int

    @property
    def failure_rate(self) -> float | None:
        """Failed ÷ (delivered + failed), in percent; None when nothing ended."""
        ended = self.delivered + self.failed
        return round(100 * self.failed / ended, 2) if ended else None


def provider_trends(
    *, store, producer_id: int, start: date, end: date, latency: str = "accepted_to_provider"
) -> list[ProviderDay]:
    """Per day and provider from `start` to `end` (both included): `latency`'s
    percentiles (one of PROVIDER_LATENCIES) and the delivered and failed counts."""
    latency_kind = PROVIDER_LATENCIES[latency]
    # Our own kind names, not a caller's: written into the statement as literals.
    kinds = ", ".join(f"'{kind}'" for kind in sorted({latency_kind, *_ENDED}))
    rows = store.query(
        "SELECT toString(day), provider, kind, sum(events),"
        f" quantilesIfMerge({_LEVELS})(latency) FROM {DAILY}"
        " WHERE producer_id = {producer:UInt64} AND day >= {start:Date} AND day <= {end:Date}"
        f" AND kind IN ({kinds})"
        " GROUP BY day, provider, kind ORDER BY day, provider",
        {
            "producer": producer_id,
            "start": start.isoformat(),
            "end": end.isoformat(),
        },
    )
    found: dict[tuple[str, str], dict] = {}
    for day, provider, kind, count, quantiles in rows:
        entry = found.setdefault(
            (day, provider),
            {"latency_ms": dict.fromkeys(PROVIDER_PERCENTILES), "delivered": 0, "failed": 0},
        )
        if kind in _ENDED:
            entry[str(kind)] += int(count)
        if kind == latency_kind and int(count):
            entry["latency_ms"] = {
                name: round(float(q))
                for name, q in zip(PROVIDER_PERCENTILES, quantiles, strict=True)
            }
    return [
        ProviderDay(day=day, provider=provider, **entry) for (day, provider), entry in found.items()
    ]


def campaign_sends(*, store, producer_id: int, campaign_id: int) -> list[tuple[str, str, int]]:
    """(hour, channel, tries at the provider) for the campaign, oldest hour first; the
    hour as `YYYY-MM-DD HH:00` (UTC)."""
    rows = store.query(
        "SELECT formatDateTime(toStartOfHour(occurred_at), '%Y-%m-%d %H:00'), channel, count()"
        f" FROM {EVENTS}"
        " WHERE producer_id = {producer:UInt64} AND campaign_id = {campaign:UInt64}"
        " AND kind = {kind:String}"
        " GROUP BY 1, channel ORDER BY 1, channel",
        {"producer": producer_id, "campaign": campaign_id, "kind": str(EventKind.SENT)},
    )
    return [(hour, channel, int(count)) for hour, channel, count in rows]
