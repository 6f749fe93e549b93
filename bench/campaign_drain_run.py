"""One S7 run: a campaign launched through the API and drained by the shipped processes.

The Procfile's workers, relays and analytics shipper (BENCH_S7_PROCESSES) are started
afresh for each run, with email going to the counting sink. Once every worker is ready,
a warm-up campaign to one recipient goes through the whole path (fan-out, relay,
routing, sending), so the timed run never pays for a relay's or a connection's start.
Then the counts are read, the campaign to recipients 1..n is launched with POST
/v1/campaigns (in-process, the call a producer or the admin's service makes), and timed
to the n-th email received by the sink. The counts and the PostgreSQL CPU cover launch
-> every delivery final and, with the shipper running, every delivery event in the
analytics store (bench/analytics_lag.py).

Only the API, the Procfile and the database's delivery statuses are relied on, never a
task name or a module of the pipeline, so the same run measures tomorrow's batches.
"""

from __future__ import annotations

import time
from contextlib import nullcontext
from dataclasses import dataclass
from typing import TYPE_CHECKING

from bench.analytics_lag import ANALYTICS_OFF, LagWatch, StoreLag, queue_shipped, store_env
from bench.campaign_seed import CAMPAIGN_PAYLOAD, campaign_reset, user_id
from bench.config import BenchError
from bench.costs import Costs, PgCpu, counted_here, counting_env, read_tally
from bench.login_codes import check, wait_ready
from bench.pipeline_drains import wait_final, wait_until
from bench.processes import Proc, procfile_entries
from bench.smtp_sink import Sink

if TYPE_CHECKING:  # Django is set up only after the bench has prepared its places
    from django.test import Client

    from bench.runner import Bench

CATEGORY = "bench.campaign"  # S7's own marketing category: inapp + email (campaign_drain)
PREFIX = "bench-c-"  # S7's recipients; number 0 is the warm-up's
WARM_UP = 0


@dataclass(frozen=True)
class CampaignDrain:
    """One timed campaign: n recipients, launch -> last email, and what it cost."""

    n: int
    seconds: float  # launch -> the n-th email received by the sink
    final_seconds: float  # launch -> every delivery final (seen by polling)
    costs: Costs
    statuses: dict[str, int]  # "channel status" -> deliveries, warm-up left out
    extra_emails: int  # received beyond n (duplicates), by the end
    store_lag: StoreLag | None  # the analytics store's lag (None: no analytics process)
    process_cpu: dict[str, float]  # Procfile name -> CPU seconds, launch -> every event final
    database_cpu: dict[str, float]  # Procfile name -> its PostgreSQL backends' CPU seconds

    @property
    def rate(self) -> float:
        return self.n / self.seconds


def start_processes(
    bench: Bench, env: dict[str, str], stamp: str, *, analytics: bool = True
) -> tuple[list[Proc], list[str]]:
    """Start the matching Procfile processes, counting; (processes, workers' ready keys).
    Without `analytics`, the shipper is left out and no process writes events."""
    procs, ready_keys = [], []
    for name, argv in procfile_entries(bench.config.s7_processes):
        if name == "analytics" and not analytics:
            continue
        ready_key = f"bench:ready:{stamp}:{name}"
        child_env = {
            **env,
            **({} if analytics else ANALYTICS_OFF),
            **counting_env(f"bench:count:{stamp}", bench.config.count_flush),
            "BENCH_READY_KEY": ready_key,
            **(store_env() if name == "analytics" else {}),
        }
        procs.append(bench.stack.start(f"s7-{name}", argv, child_env))
        if name.startswith("worker"):  # the Procfile's Celery workers say when ready
            ready_keys.append(ready_key)
    return procs, ready_keys


def launch(client: Client, name: str, user_ids: list[str]) -> int:
    """POST /v1/campaigns to `user_ids`; it must be 202. Returns the campaign id."""
    response = client.post(
        "/v1/campaigns",
        {
            "name": name,
            "category": CATEGORY,
            "payload": CAMPAIGN_PAYLOAD,
            "audience": {"user_ids": user_ids},
        },
        content_type="application/json",
    )
    if response.status_code != 202:
        raise BenchError(f"campaign launch answered {response.status_code}: {response.content!r}")
    return int(response.json()["campaign_id"])


def wait_emails(bench: Bench, sink: Sink, count: int, procs: list[Proc]) -> float:
    """Wait until the sink has `count` messages in all; returns when the last arrived.

    Fails when a process died or a task was dead-lettered, when no email arrived for
    BENCH_STALL_SECONDS (the gate held them back, or something raised: see the logs),
    or after BENCH_S7_TIMEOUT.
    """
    deadline = time.monotonic() + bench.config.s7_timeout
    seen, moved = sink.status().count, time.monotonic()
    while (status := sink.status()).count < count:
        now = time.monotonic()
        if status.count != seen:
            seen, moved = status.count, now
        problem = ""
        if now - moved > bench.config.stall_seconds:
            problem = f"no email for {bench.config.stall_seconds:.0f} s"
        elif now > deadline:
            problem = f"not done after {bench.config.s7_timeout:.0f} s"
        if problem:
            raise BenchError(
                f"{problem}: the sink has {status.count} of {count} messages; deliveries "
                f"{statuses()}; see var/bench/s7-*.log"
            )
        check(procs)
        time.sleep(0.05)
    return status.last


def statuses() -> dict[str, int]:
    """Deliveries by channel and status, the warm-up recipient's left out."""
    from django.apps import apps
    from django.db.models import Count

    delivery = apps.get_model("deliveries", "Delivery")
    rows = (
        delivery.objects.exclude(notification__recipient__user_id=user_id(WARM_UP, PREFIX))
        .values("channel", "status")
        .annotate(n=Count("id"))
        .order_by("channel", "status")
    )
    return {f"{row['channel']} {row['status']}": row["n"] for row in rows}


def campaign_run(
    bench: Bench, sink: Sink, n: int, label: str, *, analytics: bool = True
) -> CampaignDrain:
    """Start the processes, warm up, launch the campaign to recipients 1..n, time it to
    its last email; stop everything. The tables and the cap's counters are emptied
    first (campaign_reset), so every run meets the gate as the first of the day.
    Without `analytics`, nothing writes or ships delivery events (ANALYTICS_OFF)."""
    from django.test import override_settings

    with override_settings(NOTIFY_ANALYTICS_ENABLED=False) if not analytics else nullcontext():
        return _campaign_run(bench, sink, n, label, analytics=analytics)


def _campaign_run(
    bench: Bench, sink: Sink, n: int, label: str, *, analytics: bool
) -> CampaignDrain:
    from django.test import Client

    campaign_reset(bench)
    stamp = f"s7-{label}-{time.time_ns()}"
    flush_wait = 2 * bench.config.count_flush  # every process has written its counts
    client = Client(HTTP_AUTHORIZATION=f"Bearer {bench.api_key}")
    members = [user_id(number, PREFIX) for number in range(1, n + 1)]
    procs, ready_keys = start_processes(bench, sink.env, stamp, analytics=analytics)
    shipping = any(proc.name == "s7-analytics" for proc in procs)
    store_lag = None
    try:
        wait_ready(ready_keys, procs)
        before_warm = sink.status().count
        launch(client, f"bench s7 warm-up {stamp}", [user_id(WARM_UP, PREFIX)])
        wait_emails(bench, sink, before_warm + 1, procs)
        wait_final(bench, 1, procs, label="S7 warm-up")
        if shipping:
            wait_until(queue_shipped, procs, what="the warm-up's events not shipped", poll=0.05)
        time.sleep(flush_wait)
        before = read_tally(f"bench:count:{stamp}")
        with PgCpu(bench.places, bench.config.pg_cpu_interval) as cpu:
            cpu_before = {proc.name: proc.cpu_seconds() for proc in procs}
            start_count = sink.status().count
            # The lag is read only while a shipper runs: no polling load on a run without.
            watch = LagWatch(bench.places.database_url) if shipping else nullcontext()
            with watch as lag:
                with PgCpu(bench.places, bench.config.pg_cpu_interval) as launch_cpu:
                    launched = time.time()
                    with counted_here() as here:
                        launch(client, f"bench s7 {stamp}", members)
                last_email = wait_emails(bench, sink, start_count + n, procs)
                wait_final(bench, n, procs, label="S7")
                final = time.time()
                store_lag = lag.finish() if lag is not None else None
            process_cpu = {
                proc.name.removeprefix("s7-"): proc.cpu_seconds() - cpu_before[proc.name]
                for proc in procs
            }
            time.sleep(flush_wait)
            counted = read_tally(f"bench:count:{stamp}").since(before)
        extra = sink.status().count - start_count - n
        by_status = statuses()
    finally:
        for proc in procs:
            bench.stack.stop(proc)
        bench.close_db()
    costs = Costs(
        n,
        counted.sql + here.sql,
        counted.published + here.published,
        cpu.seconds() + launch_cpu.seconds(bench=True),
    )
    return CampaignDrain(
        n,
        last_email - launched,
        final - launched,
        costs,
        by_status,
        extra,
        store_lag,
        process_cpu,
        {
            app.removeprefix("bench:s7-"): seconds
            for app, seconds in cpu.by_app().items()
            if app.startswith("bench:s7-")
        },
    )
