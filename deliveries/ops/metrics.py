"""Prometheus metrics computed at scrape time (counts from rollups kept by beat); see
docs/metrics.md for why.

Each source (database, broker, Redis) is read independently: one that is down leaves
its metrics out and sets `notify_metrics_source_up{source=...}` to 0, while the others
are still reported.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator

from django.conf import settings
from django.utils.module_loading import import_string
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from deliveries.models import DeliveryStatus
from deliveries.ops import selectors
from notify.models import Channel
from notify.ops.beat import beat_jobs

logger = logging.getLogger(__name__)


def _database() -> Iterator[Metric]:
    accepted = CounterMetricFamily(
        "notify_notifications_accepted",
        "Notifications accepted by the API, by category and queue class.",
        labels=["category", "queue"],
    )
    for category, queue, count in selectors.accepted_by_category():
        accepted.add_metric([category, queue], count)
    yield accepted

    totals = selectors.delivery_totals()
    by_status = totals.by_status()
    deliveries = GaugeMetricFamily(
        "notify_deliveries",
        "Deliveries by channel and current status (final statuses included).",
        labels=["channel", "status"],
    )
    # Every pair, zeros included: an alert on a rate never sees a series vanish.
    for channel in Channel.values:
        for status in DeliveryStatus.values:
            deliveries.add_metric([channel, status], by_status.get((channel, status), 0))
    yield deliveries

    ratio = GaugeMetricFamily(
        "notify_first_attempt_success_ratio",
        "Delivered on the first attempt / tried and finished, per channel.",
        labels=["channel"],
    )
    for row in totals.first_attempt_success():
        ratio.add_metric([row.channel], row.ratio)
    yield ratio

    latency = HistogramMetricFamily(
        "notify_delivery_latency_seconds",
        "Event accepted → delivered (or since reached), per channel, over "
        "NOTIFY_METRICS_LATENCY_WINDOW.",
        labels=["channel"],
    )
    for histogram in selectors.delivery_latency():
        buckets = [(_bound(le), count) for le, count in histogram.buckets]
        buckets.append(("+Inf", histogram.count))
        latency.add_metric([histogram.channel], buckets, histogram.sum_seconds)
    yield latency

    by_provider = GaugeMetricFamily(
        "notify_delivered_by_provider",
        "Deliveries that succeeded over NOTIFY_METRICS_LATENCY_WINDOW, by channel and the "
        "provider that took them (a channel may fail over between several).",
        labels=["channel", "provider"],
    )
    for channel, provider, count in selectors.delivered_by_provider():
        by_provider.add_metric([channel, provider], count)
    yield by_provider

    yield GaugeMetricFamily(
        "notify_dead_deliveries",
        "Deliveries whose retries ran out (status dead).",
        value=totals.dead(),
    )
    # From the table, not the queue: the consumer keeps the queue empty, and a dead
    # letter stays counted until an operator re-drives it.
    yield GaugeMetricFamily(
        "notify_dead_letters_open",
        "Dead-lettered messages not re-driven yet (admin: Dead letters).",
        value=selectors.open_dead_letters(),
    )
    yield GaugeMetricFamily(
        "notify_outbox_oldest_unpublished_age_seconds",
        "Age of the oldest outbox row not yet published to the broker; 0 when none.",
        value=selectors.oldest_unpublished_outbox_age(),
    )


def _broker() -> Iterator[Metric]:
    depths = selectors.queue_depths()
    gauge = GaugeMetricFamily(
        "notify_queue_depth", "Messages ready in each RabbitMQ queue.", labels=["queue"]
    )
    for name, count in depths.items():
        gauge.add_metric([name], count)
    yield gauge


def _redis() -> Iterator[Metric]:
    drops = CounterMetricFamily(
        "notify_push_drops",
        "Push deliveries dropped by the per-recipient push limit (push_limit), per channel.",
        labels=["channel"],
    )
    for channel, count in selectors.push_drops().items():
        drops.add_metric([channel], count)
    yield drops
    breakers = GaugeMetricFamily(
        "notify_circuit_breaker_state",
        "Circuit breaker per provider: 0 closed, 1 half-open, 2 open.",
        labels=["provider"],
    )
    for provider, state in selectors.breaker_states().items():
        breakers.add_metric([provider], state)
    yield breakers


def _beat() -> Iterator[Metric]:
    jobs = beat_jobs()
    age = GaugeMetricFamily(
        "notify_beat_job_last_run_age_seconds",
        "Seconds since beat last sent each periodic job (no series: never sent).",
        labels=["job"],
    )
    overdue = GaugeMetricFamily(
        "notify_beat_job_overdue",
        "1 when beat has not sent the job for NOTIFY_BEAT_OVERDUE_FACTOR intervals.",
        labels=["job"],
    )
    finished = GaugeMetricFamily(
        "notify_beat_job_last_finished_age_seconds",
        "Seconds since a worker last finished each periodic job (no series: never).",
        labels=["job"],
    )
    stalled = GaugeMetricFamily(
        "notify_beat_job_stalled",
        "1 when no worker has finished the job for NOTIFY_BEAT_STALLED_FACTOR intervals.",
        labels=["job"],
    )
    for job in jobs:
        if job.age is not None:
            age.add_metric([job.name], job.age)
        overdue.add_metric([job.name], 1 if job.overdue else 0)
        if job.finished_age is not None:
            finished.add_metric([job.name], job.finished_age)
        stalled.add_metric([job.name], 1 if job.stalled else 0)
    yield age
    yield overdue
    yield finished
    yield stalled


BUILT_IN: dict[str, Callable[[], Iterator[Metric]]] = {
    "database": _database,
    "broker": _broker,
    "redis": _redis,
    "beat": _beat,
}


def metrics_sources() -> dict[str, Callable[[], Iterator[Metric]]]:
    """The sources a scrape reads: the built-in ones, then those that apps above this
    one name in NOTIFY_METRICS_SOURCES (name → dotted path; history's months are one).
    Each has its own `notify_metrics_source_up`."""
    extra = {name: import_string(path) for name, path in settings.NOTIFY_METRICS_SOURCES.items()}
    return {**BUILT_IN, **extra}


class NotifyCollector(Collector):
    """Reads every number fresh on each scrape; holds no state between scrapes."""

    def collect(self) -> Iterator[Metric]:
        up = GaugeMetricFamily(
            "notify_metrics_source_up",
            "1 when this scrape could read the source, 0 when it could not.",
            labels=["source"],
        )
        for source, read in metrics_sources().items():
            try:
                # Materialise first: a source failing halfway must not emit half its metrics.
                metrics = list(read())
            except Exception:
                logger.warning("metrics: could not read %s", source, exc_info=True)
                up.add_metric([source], 0)
                continue
            up.add_metric([source], 1)
            yield from metrics
        yield up


def metrics_render() -> bytes:
    """The whole exposition in Prometheus text format."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(NotifyCollector())
    return generate_latest(registry)


def _bound(seconds: float) -> str:
    return repr(float(seconds))
