"""Charts as plain data: what the page hands Chart.js (through `json_script`) and the
table beside it, built from the same lists so the two cannot disagree.

Pure functions of the reports: no store, no request. Names that come from teams
(categories, channels, providers, campaigns) stay data here; the template escapes them
and the script draws them as canvas text, never as HTML.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date, datetime, timedelta

from analytics.store.chart_reports import PROVIDER_PERCENTILES, ProviderDay

# A campaign's funnel, in order: (the stage as shown, the report's count).
FUNNEL = (
    ("audience", "accepted"),
    ("suppressed", "suppressed"),
    ("digested", "digested"),
    ("sent", "sent"),
    ("delivered", "delivered"),
    ("reached", "reached"),
    ("failed", "failed"),
    ("bounced", "bounced"),
    ("complained", "complained"),
    ("opened", "opened"),
    ("clicked", "clicked"),
    ("unsubscribed", "unsubscribed"),
    ("read", "read"),
)
# A chart draws at most this many series; the rest are summed into one (a producer may
# have dozens of categories, and 60 stacked colours say nothing).
MAX_SERIES = 12
OTHERS = "all others"
# Sends over time go per hour while the campaign spans at most this many hours, else per day.
MAX_HOURS = 72


@dataclass(frozen=True)
class Series:
    label: str
    data: list[float | int | None]


@dataclass(frozen=True)
class Chart:
    """One chart and its table: `labels` down the table's first column (the x axis),
    one column per series. None is a gap (no value that day), shown as "—"."""

    id: str
    title: str
    type: str  # "bar" or "line"
    axis: str  # what the labels are ("Stage", "Day", "Hour")
    unit: str  # what the values are
    labels: list[str]
    series: list[Series]
    stacked: bool = False
    notes: list[str] = field(default_factory=list)

    @property
    def data_id(self) -> str:
        """The id of the page's `json_script` element holding `document()`."""
        return f"{self.id}-data"

    def document(self) -> dict:
        """What the page's script reads (`json_script`)."""
        return {
            "type": self.type,
            "unit": self.unit,
            "stacked": self.stacked,
            "labels": self.labels,
            "datasets": [{"label": s.label, "data": s.data} for s in self.series],
        }

    def rows(self) -> list[tuple[str, list]]:
        """The table: per label, each series' value."""
        return [(label, [s.data[i] for s in self.series]) for i, label in enumerate(self.labels)]

    @property
    def summary(self) -> str:
        """The chart's accessible description (its aria-label's second half)."""
        if not self.series:
            return "no data"
        return (
            f"{len(self.series)} series ({', '.join(s.label for s in self.series)}) "
            f"over {len(self.labels)} {self.axis.lower()} values, in {self.unit}"
        )


def days_between(start: date, end: date) -> list[str]:
    """Every day from `start` to `end`, both included, as YYYY-MM-DD."""
    return [(start + timedelta(days=n)).isoformat() for n in range((end - start).days + 1)]


def _capped(series: list[Series]) -> list[Series]:
    """The MAX_SERIES - 1 largest series, and the rest summed into one."""
    if len(series) <= MAX_SERIES:
        return series
    ranked = sorted(series, key=lambda s: -sum(v or 0 for v in s.data))
    kept, rest = ranked[: MAX_SERIES - 1], ranked[MAX_SERIES - 1 :]
    summed = [sum(s.data[i] or 0 for s in rest) for i in range(len(rest[0].data))]
    return [*kept, Series(f"{OTHERS} ({len(rest)})", summed)]


def campaign_funnel(channels: dict[str, dict]) -> Chart:
    """A campaign's funnel: the stages of FUNNEL, one series per channel."""
    return Chart(
        id="campaign-funnel",
        title="Funnel per channel",
        type="bar",
        axis="Stage",
        unit="deliveries",
        labels=[stage for stage, _ in FUNNEL],
        series=[
            Series(channel, [int(counts.get(count, 0)) for _, count in FUNNEL])
            for channel, counts in channels.items()
        ],
    )


def campaign_sends_chart(rows: list[tuple[str, str, int]]) -> Chart:
    """Tries at the provider per hour and channel (per day past MAX_HOURS), with the
    empty hours between the first and the last shown as zero."""
    hours = [datetime.strptime(hour, "%Y-%m-%d %H:00") for hour, _, _ in rows]
    per_day = bool(hours) and (max(hours) - min(hours)) > timedelta(hours=MAX_HOURS)
    if per_day:
        labels = days_between(min(hours).date(), max(hours).date())
        bucket = {hour: hour[:10] for hour, _, _ in rows}
    elif hours:
        span = int((max(hours) - min(hours)).total_seconds() // 3600)
        labels = [
            (min(hours) + timedelta(hours=n)).strftime("%Y-%m-%d %H:00") for n in range(span + 1)
        ]
        bucket = {hour: hour for hour, _, _ in rows}
    else:
        labels, bucket = [], {}
    index = {label: i for i, label in enumerate(labels)}
    by_channel: dict[str, list[int]] = {}
    for hour, channel, count in rows:
        by_channel.setdefault(channel, [0] * len(labels))[index[bucket[hour]]] += count
    return Chart(
        id="campaign-sends",
        title="Sends over time (tries at the provider, UTC)",
        type="line",
        axis="Day" if per_day else "Hour",
        unit="sends",
        labels=labels,
        series=[Series(channel, data) for channel, data in sorted(by_channel.items())],
    )


def categories_channels_chart(results: list[dict], *, kind: str, start: date, end: date) -> Chart:
    """`kind`'s count per day, one stacked series per category and channel, from a
    deliveries report grouped by day, category and channel."""
    labels = days_between(start, end)
    index = {day: i for i, day in enumerate(labels)}
    by_pair: dict[tuple[str, str], list[int]] = {}
    for entry in results:
        data = by_pair.setdefault((entry["category"], entry["channel"]), [0] * len(labels))
        if entry["day"] in index:
            data[index[entry["day"]]] += entry["counts"].get(kind, 0)
    series = [
        Series(f"{category} · {channel}", data)
        for (category, channel), data in sorted(by_pair.items())
        if any(data)
    ]
    return Chart(
        id="categories-channels",
        title=f"“{kind}” per day, by category and channel",
        type="bar",
        axis="Day",
        unit=f"{kind} events",
        labels=labels,
        series=_capped(series),
        stacked=True,
    )


def provider_charts(days: list[ProviderDay], *, start: date, end: date) -> list[Chart]:
    """Per provider, its latency percentiles per day; then one chart of every
    provider's failure rate per day."""
    labels = days_between(start, end)
    index = {day: i for i, day in enumerate(labels)}
    providers = sorted({d.provider for d in days})
    charts = []
    rates: dict[str, list[float | None]] = {p: [None] * len(labels) for p in providers}
    for number, provider in enumerate(providers):
        percentiles: dict[str, list[int | None]] = {
            name: [None] * len(labels) for name in PROVIDER_PERCENTILES
        }
        for d in days:
            if d.provider != provider or d.day not in index:
                continue
            for name in PROVIDER_PERCENTILES:
                percentiles[name][index[d.day]] = d.latency_ms[name]
            rates[provider][index[d.day]] = d.failure_rate
        charts.append(
            Chart(
                id=f"provider-latency-{number}",
                title=f"Latency of {provider}",
                type="line",
                axis="Day",
                unit="milliseconds",
                labels=labels,
                series=[Series(name, data) for name, data in percentiles.items()],
            )
        )
    charts.append(
        Chart(
            id="provider-failure-rate",
            title="Failure rate per provider (failed ÷ delivered and failed)",
            type="line",
            axis="Day",
            unit="percent",
            labels=labels,
            # One provider per channel (NOTIFY_CHANNEL_PROVIDERS): a handful of series.
            series=[Series(provider, data) for provider, data in rates.items()],
        )
    )
    return charts
