"""S7: a campaign to consenting recipients, launch -> last email received by the SMTP
sink, vs a bare smtplib loop sending as many messages over ONE connection into the same
sink.

Subject: BENCH_S7_RECIPIENTS recipients (bench-c-0000001, ...: an email, consent to S7's
category, a quiet window of none), one campaign per run through the shipped processes
(bench/campaign_drain_run.py). The category, `bench.campaign`, is marketing, on the low
queue, with inapp + email as its channels: each notification is one in-app entry and
one email. Consent is to that category only, so S4's "everyone with consent" never
counts these people. The daily marketing cap (3) is emptied before each run
(campaign_reset), so repeated runs on the same people are never capped.

Baseline: smtplib, one connection, n sendmail calls of a campaign-sized email into the
same sink, timed from connect to the n-th message received by the sink.

BENCH_S7_RUNS runs of each, alternating, baseline first; medians. With analytics on
(and BENCH_S7_ANALYTICS_OFF left at 1), each campaign has a twin with analytics off, run
beside it (the two take turns to go first, over an even number of runs: BENCH_S7_RUNS
rounded up), and on / off is printed pair by pair. Then, unless
BENCH_S7_LARGE_RECIPIENTS=0, one campaign to that many (100,000) end to end. Per
campaign notification: SQL statements, broker messages and PostgreSQL CPU over launch
-> every delivery final (bench/costs.py).
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from typing import TYPE_CHECKING

from bench.campaign_drain_run import (
    CATEGORY,
    PREFIX,
    WARM_UP,
    CampaignDrain,
    campaign_run,
)
from bench.campaign_seed import campaign_reset, seed_recipients
from bench.config import (
    ANALYTICS_TARGET,
    S7_BROKER_TARGET,
    S7_LAG_TARGET,
    S7_SQL_TARGET,
    S7_TARGET,
)
from bench.costs import costs_text, median_costs
from bench.processes import procfile_entries
from bench.report import phase, ratio, twin_runs, verdict
from bench.smtp_sink import Loop, Sink, smtp_loop

if TYPE_CHECKING:  # bench.runner imports this module to run it
    from bench.runner import Bench

TEMPLATES = {
    "inapp": {"title": "{{ headline }}", "body": "", "url": "{{ url }}"},
    "email": {
        "subject": "{{ headline }}",
        "html_body": '<h1>{{ headline }}</h1><p><a href="{{ url }}">See the offers</a></p>',
        "text_body": "{{ headline }}\nSee the offers: {{ url }}",
    },
}


def seed_category() -> int:
    """Create (or keep) S7's marketing category with published en templates; its id."""
    from notify.models import Category, QueueClass
    from templates_admin.models import Template
    from templates_admin.services import template_version_create, template_version_publish

    category, _ = Category.objects.update_or_create(
        key=CATEGORY,
        defaults={
            "description": "Bench campaigns (S7)",
            "queue": QueueClass.LOW,
            "mandatory": False,
            "marketing": True,
            "default_channels": list(TEMPLATES),
            "payload_schema": {
                "type": "object",
                "properties": {"headline": {"type": "string"}, "url": {"type": "string"}},
                "required": ["headline", "url"],
            },
        },
    )
    for channel, fields in TEMPLATES.items():
        template, _ = Template.objects.get_or_create(
            category=category, channel=channel, locale="en"
        )
        if template.published_version_id is None:
            version = template_version_create(template=template, fields=fields)
            template_version_publish(version=version)
    return category.pk


def scenario_s7(bench: Bench) -> None:
    """BENCH_S7_RUNS smtplib loops and campaigns of BENCH_S7_RECIPIENTS, alternating;
    then the large campaign. Prints emails/s, the ratio and the costs per notification."""
    config = bench.config
    n = config.s7_recipients
    largest = max(n, config.s7_large)
    with phase(f"S7: seeding {largest} recipients"):
        category_id = seed_category()
        added = seed_recipients(
            bench, largest, prefix=PREFIX, first=WARM_UP, consent_category=category_id
        )
    bench.close_db()
    sink = Sink(bench.stack, bench.env)
    try:
        loops: list[Loop] = []
        drains: list[CampaignDrain] = []
        unshipped: list[CampaignDrain] = []  # the same campaign with analytics off
        pairing = config.s7_analytics_off and analytics_in_runs(bench)
        runs = twin_runs(config.s7_runs, twins=pairing)
        for run in range(runs):
            with phase(f"S7 run {run + 1} of {runs}: smtplib loop, then campaign"):
                loops.append(smtp_loop(sink, n, config.s7_timeout))
                # Twins take turns going first (neither always follows the loop).
                for analytics in (True, False) if run % 2 == 0 else (False, True):
                    if analytics:
                        drains.append(campaign_run(bench, sink, n, f"run{run}"))
                    elif pairing:
                        unshipped.append(
                            campaign_run(bench, sink, n, f"run{run}-off", analytics=False)
                        )
        baseline = statistics.median(loop.rate for loop in loops)
        report_runs(bench, drains, loops, added)
        report_analytics_off(drains, unshipped, loops, pairing)
        if config.s7_large:
            with phase(f"S7 large: a campaign to {config.s7_large}"):
                large = campaign_run(bench, sink, config.s7_large, "large")
            report_large(large, baseline)
        else:
            print("S7 large campaign: off (BENCH_S7_LARGE_RECIPIENTS=0)")
    finally:
        sink.stop(bench.stack)
        campaign_reset(bench)


def report_runs(bench: Bench, drains: list[CampaignDrain], loops: list[Loop], added: int) -> None:
    """The S7 lines: ratio and rates, seconds, costs per notification, warnings."""
    n = bench.config.s7_recipients
    subject = statistics.median(d.rate for d in drains)
    baseline = statistics.median(loop.rate for loop in loops)
    value = ratio(subject, baseline)
    names = ", ".join(name for name, _ in procfile_entries(bench.config.s7_processes))
    print(
        f"S7 campaign drain: {value:.3g}x smtplib loop ({subject:.0f} emails/s vs "
        f"{baseline:.0f} emails/s over one connection; {n} consenting recipients, inapp + "
        f"email, POST /v1/campaigns -> last email received by the SMTP sink, through "
        f"{names}; medians of {len(drains)}; {verdict(value, S7_TARGET, at_least=True)})"
    )
    print(
        f"S7 seconds per run: campaign {statistics.median(d.seconds for d in drains):.1f} "
        f"(every delivery final {statistics.median(d.final_seconds for d in drains):.1f}), "
        f"smtplib loop {statistics.median(loop.seconds for loop in loops):.1f}"
        + (f" ({added} recipients seeded this run)" if added else "")
    )
    costs = median_costs([d.costs for d in drains])
    print(
        "S7 per campaign notification (launch -> every delivery final, every process): "
        + costs_text(costs, sql_target=S7_SQL_TARGET, broker_target=S7_BROKER_TARGET)
    )
    report_store_lag(drains)
    report_process_cpu(drains)
    for drain in drains:
        warn_statuses("S7", drain)


def report_store_lag(drains: list[CampaignDrain]) -> None:
    """The analytics store's lag during the drains, when the shipper ran beside them."""
    lags = [d.store_lag for d in drains if d.store_lag is not None]
    if not lags:
        print("S7 analytics store lag: not measured (no analytics process in BENCH_S7_PROCESSES)")
        return
    worst = max(lag.max_seconds for lag in lags)
    drained = [lag.drained_after for lag in lags]
    after = (
        "never within the wait"
        if None in drained
        else f"{max(d for d in drained if d is not None):.1f} s at most"
    )
    print(
        f"S7 analytics store lag during the drain: {worst:.2f} s at most over "
        f"{len(lags)} runs (the oldest queued event's age, read every 0.25 s; "
        f"{verdict(worst, S7_LAG_TARGET, at_least=False, unit=' s')}); every event in the "
        f"store after the last delivery was final: {after}"
    )


def analytics_in_runs(bench: Bench) -> bool:
    """Whether S7's runs have analytics on: the setting, and a shipper among the processes."""
    from django.conf import settings

    names = [name for name, _ in procfile_entries(bench.config.s7_processes)]
    return bool(settings.NOTIFY_ANALYTICS_ENABLED) and "analytics" in names


def report_analytics_off(
    drains: list[CampaignDrain], unshipped: list[CampaignDrain], loops: list[Loop], paired: bool
) -> None:
    """The same campaign with analytics off, each run beside its analytics-on twin:
    its ratio, and on / off pair by pair (the bound: analytics costs at most 5 %)."""
    if not paired:
        print(
            "S7 with analytics off: not run (BENCH_S7_ANALYTICS_OFF=0, analytics off "
            "already, or no analytics process in BENCH_S7_PROCESSES)"
        )
        return
    baseline = statistics.median(loop.rate for loop in loops)
    off = statistics.median(d.rate for d in unshipped)
    pairs = [on.rate / twin.rate for on, twin in zip(drains, unshipped, strict=True)]
    both = statistics.median(d.rate for d in drains) / off
    costs = median_costs([d.costs for d in unshipped])
    print(
        f"S7 with analytics off (NOTIFY_ANALYTICS_ENABLED=0, no shipper; each run beside "
        f"its analytics-on twin, the two taking turns to go first): "
        f"{ratio(off, baseline):.3g}x ({off:.0f} emails/s); {costs_text(costs)} per notification"
    )
    print(
        f"S7 analytics on / off: {both:.3f} on the medians; pair by pair "
        + ", ".join(f"{p:.3f}" for p in pairs)
        + f" ({verdict(both, ANALYTICS_TARGET, at_least=True)})"
    )
    report_process_cpu(unshipped, label="S7 analytics off")


def report_process_cpu(drains: list[CampaignDrain], *, label: str = "S7") -> None:
    """Where the drain's CPU went: each Procfile process's CPU per notification, and its
    PostgreSQL backends' beside it."""

    def each_ms(seconds_of: Callable[[CampaignDrain], float]) -> float:
        return statistics.median(seconds_of(d) / d.n for d in drains) * 1000

    names = sorted({name for d in drains for name in d.process_cpu})
    shares = ", ".join(
        f"{name} {each_ms(lambda d, name=name: d.process_cpu.get(name, 0.0)):.3f}"
        f" (database {each_ms(lambda d, name=name: d.database_cpu.get(name, 0.0)):.3f})"
        for name in names
    )
    print(
        f"{label} CPU per notification by process, ms (launch -> every delivery final; medians; "
        f"its PostgreSQL backends' in brackets): {shares}"
    )


def report_large(large: CampaignDrain, baseline: float) -> None:
    """The large campaign's line: seconds, emails/s, costs."""
    print(
        f"S7 large campaign end to end: {large.n} recipients in {large.seconds:.0f} s, "
        f"{large.rate:.0f} emails/s ({ratio(large.rate, baseline):.3g}x the smtplib loop's "
        f"{baseline:.0f}/s; every delivery final after {large.final_seconds:.0f} s); per "
        f"notification: {costs_text(large.costs)}"
    )
    warn_statuses("S7 large", large)


def warn_statuses(name: str, drain: CampaignDrain) -> None:
    """A warning when not every notification got its email and in-app entry, once."""
    expected = {"email delivered": drain.n, "inapp delivered": drain.n}
    if drain.statuses != expected:
        print(f"{name}: WARNING deliveries {drain.statuses}, expected {expected}")
    if drain.extra_emails:
        print(f"{name}: WARNING the sink received {drain.extra_emails} emails more than {drain.n}")
