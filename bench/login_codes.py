"""S3: login codes (high queue) delivered by email while a campaign drains on `low`.

The shipped processes run it: scripts/worker.sh high, scripts/worker.sh low, the outbox
relays as the Procfile runs them (scripts/relay.sh high,medium and low) and, with
analytics on, the Procfile's `analytics` shipper (the campaign's events are shipped
while the codes go, as deployed), with email going to an SMTP sink. Each run starts them
afresh, waits until both workers are ready and WARM_UP_CODES start-up codes went through
at the measured pace, then POSTs BENCH_LOGIN_CODES `security.login_code` events (email
only, each to its own person unless BENCH_S3_RECIPIENTS says how many; people outside
the campaign unless BENCH_S3_MEMBERS=1 sends them to members whose campaign email is
still to come) through the API in-process, one every 100 ms. The figure is the p99 of
Delivery.finished_at - Notification.created_at over them: first idle (baseline), then
after a campaign to BENCH_CAMPAIGN_DRAIN consenting recipients (inapp + email) has
started draining on the low worker (subject). Runs alternate; the processes are stopped
and the tables emptied between runs, so a campaign's leftovers never reach the next.
"""

from __future__ import annotations

import contextlib
import statistics
import time
from collections import Counter
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from bench.analytics_lag import S3_STORE_DIR, queue_shipped, store_env
from bench.campaign_seed import (
    BENCH_CAMPAIGN_NAME,
    CAMPAIGN_CATEGORY,
    CAMPAIGN_PAYLOAD,
    campaign_reset,
    seed_recipients,
    user_id,
)
from bench.config import DEMO_USER, BenchError
from bench.costs import BENCH_APP
from bench.login_code_steps import DETAILS, STAGES, steps_print, waits_print
from bench.pg_waits import WaitSampler
from bench.pipeline_drains import (  # READY_TIMEOUT also bounds the campaign's first email
    READY_TIMEOUT,
    wait_ready,
    wait_until,
)
from bench.processes import Proc, procfile_entries, start_smtp_sink
from bench.report import percentile, phase, ratio, verdict

if TYPE_CHECKING:  # Django is set up only after the bench has prepared its places
    from django.test import Client

    from bench.runner import Bench

LOGIN_CATEGORY = "security.login_code"
INTERVAL = 0.1  # seconds between two login codes
# The backends a login code's statements run on: the bench's own intake (BENCH_APP), the
# high worker and the high relay (bench.processes names each process's connections).
CODE_APPS = (BENCH_APP, "bench:s3-worker-high", "bench:s3-relay")
# Codes sent (at INTERVAL) after the processes start and before the measured ones: the
# high worker's threads pool hands a task to any idle thread of its eight, and each
# thread's first send opens its SMTP session. Start-up, reported on its own line.
WARM_UP_CODES = 16


@dataclass(frozen=True)
class Codes:
    """One run's login codes: their latencies (s), and how the campaign stood."""

    latencies: list[float]
    relay_waits: list[float]  # of each code: created -> its route task published
    campaign_left: int | None = None  # campaign emails not yet sent at the last code
    # Each code's time per step (s): relay, route (published -> routed), queue (routed ->
    # the sender claimed it), send (claimed -> delivered).
    stages: dict[str, list[float]] | None = None
    # The campaign's fan-out ended this many seconds after the first code (negative: before).
    fan_out_end: float | None = None
    warm_up: list[float] | None = None  # the start-up codes' latencies (s), before any campaign
    waits: Counter[str] | None = None  # BENCH_S3_WAITS: the codes' backends (bench.pg_waits)

    @property
    def p99(self) -> float:
        return percentile(self.latencies, 0.99)


def scenario_s3(bench: Bench) -> None:
    """Time BENCH_LOGIN_CODES login codes idle and during a campaign, BENCH_RUNS times
    each, alternating; print both p99s and their ratio."""
    m = bench.config.campaign_drain
    with phase(f"S3: seeding {m} campaign recipients"):
        seed_recipients(bench, m)
        count = bench.config.code_recipients or bench.config.login_codes
        if bench.config.codes_to_members:
            # Idle: any members; during the campaign, those still waiting for its email
            # (members_waiting, chosen once it is under way).
            users = [user_id(m - i) for i in range(min(count, m))]
        else:
            users = code_recipients(count)
    bench.close_db()
    sink, env = start_smtp_sink(bench.stack, bench.env)
    idle: list[Codes] = []
    busy: list[Codes] = []
    try:
        for run in range(bench.config.runs):
            idle.append(codes_run(bench, env, f"idle{run}", users, campaign=False))
            busy.append(codes_run(bench, env, f"busy{run}", users, campaign=True))
    finally:
        bench.stack.stop(sink)
        campaign_reset(bench)

    idle_p99 = statistics.median(c.p99 for c in idle) * 1000
    busy_p99 = statistics.median(c.p99 for c in busy) * 1000
    value = ratio(busy_p99, idle_p99)
    k = bench.config.login_codes
    print(
        f"S3 login code during a campaign: p99 {value:.3g}x idle ({busy_p99:.0f} ms vs "
        f"{idle_p99:.0f} ms, event -> email delivered, {k} codes 100 ms apart to "
        f"{len(users)} people{' in the campaign' if bench.config.codes_to_members else ''}, "
        "campaign to "
        f"{m} (inapp + email) draining on the low worker"
        + (f" paced at {rate:g}/s" if (rate := bench.config.campaign_send_rate) else "")
        + f"; {verdict(value, 2, at_least=False)})"
    )
    # The same over every run's codes together: the p99 of one run is its second slowest
    # code, which one hiccup of a shared machine decides; pooled, it is the sixth of 600.
    pooled_busy = percentile([x for c in busy for x in c.latencies], 0.99) * 1000
    pooled_idle = percentile([x for c in idle for x in c.latencies], 0.99) * 1000
    print(
        f"S3 p99 over all runs' codes pooled: {ratio(pooled_busy, pooled_idle):.3g}x "
        f"({pooled_busy:.0f} ms vs {pooled_idle:.0f} ms; for reading, not the target)"
    )
    median_idle = statistics.median(percentile(c.latencies, 0.5) for c in idle) * 1000
    median_busy = statistics.median(percentile(c.latencies, 0.5) for c in busy) * 1000
    left = [c.campaign_left for c in busy if c.campaign_left is not None]
    print(
        f"S3 median login code: {median_busy:.0f} ms during the campaign, {median_idle:.0f} ms "
        f"idle; campaign emails still unsent at the last code: {left} of {m}; its fan-out "
        "ended: "
        + ", ".join(
            f"{c.fan_out_end:.1f} s after the first" if c.fan_out_end is not None else "not yet"
            for c in busy
        )
    )
    # Where the time goes: before the relay published the route task, or after it.
    if all(c.relay_waits for c in idle + busy):
        relay_busy = statistics.median(percentile(c.relay_waits, 0.5) for c in busy) * 1000
        relay_idle = statistics.median(percentile(c.relay_waits, 0.5) for c in idle) * 1000
        print(
            f"S3 median wait for the relay (created -> route task published): "
            f"{relay_busy:.0f} ms during the campaign, {relay_idle:.0f} ms idle"
        )
    if all(c.stages for c in idle + busy):
        steps_print(busy, idle)
    if all(c.waits is not None for c in idle + busy):
        waits_print(busy, idle)
    warm = [x for c in idle + busy for x in c.warm_up or []]
    if warm:
        print(
            f"S3 start-up (not in the ratio): the {WARM_UP_CODES} codes after each start, "
            f"before any campaign: median {percentile(warm, 0.5) * 1000:.0f} ms, slowest "
            f"{max(warm) * 1000:.0f} ms"
        )
    if any(n == 0 for n in left):
        print("S3: WARNING the campaign was over before the last code; raise BENCH_CAMPAIGN_DRAIN")


def code_recipients(count: int) -> list[str]:
    """The people the login codes go to: the demo user and `count` - 1 more, with email.
    A login wave is many people, each with one code; a burst to one person goes one
    at a time by design (per-recipient order), which BENCH_S3_RECIPIENTS=1 shows."""
    from notify.models import Recipient

    others = [f"bench-s3-login-{i}" for i in range(1, count)]
    Recipient.objects.bulk_create(
        [Recipient(user_id=u, email=f"{u}@example.com", locale="en") for u in others],
        ignore_conflicts=True,
    )
    return [DEMO_USER, *others]


def codes_run(
    bench: Bench, env: dict[str, str], name: str, users: list[str], *, campaign: bool
) -> Codes:
    """Start the processes, warm up, optionally launch the campaign, send the codes,
    wait until each has its email delivery final; stop everything and reset."""
    from django.conf import settings
    from django.test import Client

    campaign_reset(bench)
    stamp = f"s3-{name}-{time.time_ns()}"
    keys = {queue: f"bench:ready:{stamp}:{queue}" for queue in ("high", "low")}
    procs = [
        bench.stack.start(
            f"s3-worker-{queue}",
            ["bash", "scripts/worker.sh", queue],
            {**env, "BENCH_READY_KEY": key},
        )
        for queue, key in keys.items()
    ]
    for name, queues in (("s3-relay", "high,medium"), ("s3-relay-low", "low")):
        procs.append(bench.stack.start(name, ["bash", "scripts/relay.sh", queues], env))
    shipping = bool(settings.NOTIFY_ANALYTICS_ENABLED)
    if shipping:
        shipper = dict(procfile_entries(("analytics",)))["analytics"]
        procs.append(bench.stack.start("s3-analytics", shipper, {**env, **store_env(S3_STORE_DIR)}))
    client = Client(HTTP_AUTHORIZATION=f"Bearer {bench.api_key}")
    try:
        wait_ready(list(keys.values()), procs)
        # Start-up first, at the measured pace: relay listening, and each sender thread's
        # first send (its SMTP session opened) out of the measured codes. (Their event ids
        # are outside the measured codes' prefix, "<stamp>-".)
        for number in range(WARM_UP_CODES):
            due = time.monotonic() + INTERVAL
            post_code(client, f"{stamp}:warm{number}", number, users[-1 - number % len(users)])
            time.sleep(max(0.0, due - time.monotonic()))
        warm_up = wait_emails(bench, f"{stamp}:warm", WARM_UP_CODES, procs)
        if shipping:  # its start-up (the embedded engine's load) is not among the codes
            wait_until(
                queue_shipped,
                procs,
                what="the analytics shipper still held the warm-up's events",
                poll=0.2,
            )
        prefix = ""
        if campaign:
            prefix = campaign_start(bench)
            wait_campaign_email(bench, prefix, procs)
            time.sleep(bench.config.s3_codes_after)
            if bench.config.codes_to_members:
                users = members_waiting(prefix, len(users))
        sampler = WaitSampler(CODE_APPS) if bench.config.s3_waits else None
        with sampler or contextlib.nullcontext():
            for number in range(bench.config.login_codes):
                due = time.monotonic() + INTERVAL
                post_code(client, f"{stamp}-{number}", number, users[number % len(users)])
                time.sleep(max(0.0, due - time.monotonic()))
        # Outside the sampler: the bench's own queries wait there, on its intake's backend.
        rows = wait_emails(bench, f"{stamp}-", bench.config.login_codes, procs)
        last = max(finished for _, _, finished in rows)
        left = campaign_left(prefix, last, bench.config.campaign_drain) if campaign else None
        first = min(created for created, _, _ in rows)
        fan_out_end = fan_out_after_first_code(prefix, first) if campaign else None
    finally:
        for proc in procs:
            bench.stack.stop(proc)
        bench.close_db()
    return Codes(
        [(finished - created).total_seconds() for created, _, finished in rows],
        [(published - created).total_seconds() for created, published, _ in rows if published],
        left,
        code_stages(bench, f"{stamp}-"),
        fan_out_end,
        [(finished - created).total_seconds() for created, _, finished in warm_up],
        sampler.counts if sampler else None,
    )


def members_waiting(prefix: str, count: int) -> list[str]:
    """Up to `count` campaign members whose campaign notification is written but not
    routed yet (the furthest from it first): their campaign email is still to come."""
    from notify.models import Notification

    users = list(
        Notification.objects.filter(event_id__startswith=prefix, routed_at__isnull=True)
        .order_by("-created_at", "-id")
        .values_list("recipient__user_id", flat=True)[:count]
    )
    if not users:
        raise BenchError("S3: no campaign member is waiting for the campaign's email")
    return users


def code_stages(bench: Bench, prefix: str) -> dict[str, list[float]] | None:
    """Where each login code's time went, from the rows' own timestamps."""
    from django.db.models import OuterRef, Subquery

    from deliveries.models import Delivery, DeliveryAttempt

    rows = Delivery.objects.filter(
        notification__event_id__startswith=prefix,
        notification__category__key=LOGIN_CATEGORY,
        channel="email",
    ).annotate(  # a subquery: PostgreSQL groups by the table's real key, (id, accepted_at)
        held=Subquery(
            DeliveryAttempt.objects.filter(delivery=OuterRef("pk"))
            .order_by("-held_ms")
            .values("held_ms")[:1]
        )
    )
    stages: dict[str, list[float]] = {stage: [] for stage in (*STAGES, *DETAILS, "at")}
    first = (
        rows.order_by("notification__created_at")
        .values_list("notification__created_at", flat=True)
        .first()
    )
    for row in rows.values_list(
        "notification__created_at",
        "notification__outbox__published_at",
        "notification__routed_at",
        "claimed_at",
        "finished_at",
        "enqueued_at",
        "held",
    ):
        times, (enqueued, held) = row[:5], row[5:]
        if any(t is None for t in times) or enqueued is None:
            return None
        for stage, start, end in zip(STAGES, times, times[1:], strict=False):
            stages[stage].append((end - start).total_seconds())
        stages["held"].append((held or 0) / 1000)
        stages["published->claimed"].append((times[3] - enqueued).total_seconds())
        stages["at"].append((times[0] - first).total_seconds())
    return stages


def post_code(client: Client, event_id: str, number: int, user_id: str) -> None:
    """POST one login code (email only) to `user_id`; it must be 202."""
    response = client.post(
        "/v1/notifications",
        {
            "event_id": event_id,
            "user_id": user_id,
            "category": LOGIN_CATEGORY,
            "channels": ["email"],
            "payload": {"code": f"{number:06d}"},
        },
        content_type="application/json",
    )
    if response.status_code != 202:
        raise BenchError(f"login code POST answered {response.status_code}: {response.content!r}")


def campaign_start(bench: Bench) -> str:
    """Launch the campaign to bench recipients 1..M (it fans out on the low worker);
    returns its event id prefix."""
    from campaigns.fanout import campaign_launch
    from campaigns.models import AudienceKind
    from notify.models import Category

    members = [user_id(number) for number in range(1, bench.config.campaign_drain + 1)]
    campaign = campaign_launch(
        name=f"{BENCH_CAMPAIGN_NAME} s3 {time.time_ns()}",
        category=Category.objects.get(key=CAMPAIGN_CATEGORY),
        payload=CAMPAIGN_PAYLOAD,
        audience_kind=AudienceKind.USER_IDS,
        audience_spec={"user_ids": members},
        send_rate=bench.config.campaign_send_rate,
    )
    return campaign.event_id_prefix


def wait_campaign_email(bench: Bench, prefix: str, procs: list[Proc]) -> None:
    """Wait until the campaign's first email went out: fan-out, relay, routing and the
    low worker's sends are all under way before the codes start."""
    from deliveries.models import Delivery

    sent = Delivery.objects.filter(
        notification__event_id__startswith=prefix, channel="email", finished_at__isnull=False
    )
    deadline = time.monotonic() + READY_TIMEOUT
    while not sent.exists():
        if time.monotonic() > deadline:
            raise BenchError(f"no campaign email within {READY_TIMEOUT:.0f} s")
        check(procs)
        time.sleep(0.1)


def wait_emails(
    bench: Bench, prefix: str, count: int, procs: list[Proc]
) -> list[tuple[datetime, datetime | None, datetime]]:
    """Wait until the `count` login codes under `prefix` have a final email delivery;
    returns (Notification.created_at, Outbox.published_at, Delivery.finished_at) of each."""
    from deliveries.models import FINAL_STATUSES, Delivery

    final = Delivery.objects.filter(
        notification__event_id__startswith=prefix,
        notification__category__key=LOGIN_CATEGORY,
        channel="email",
        status__in=FINAL_STATUSES,
    )
    deadline = time.monotonic() + bench.config.pipeline_timeout
    while True:
        rows = list(
            final.values_list(
                "notification__created_at",
                "notification__outbox__published_at",
                "finished_at",
                "status",
            )
        )
        if len(rows) >= count:
            break
        if time.monotonic() > deadline:
            raise BenchError(f"{len(rows)} of {count} login codes final after the timeout")
        check(procs)
        time.sleep(0.1)
    bad = [status for *_, status in rows if status != "delivered"]
    if bad:
        raise BenchError(f"login code emails not delivered: {sorted(set(bad))}")
    return [(created, published, finished) for created, published, finished, _ in rows]


def fan_out_after_first_code(prefix: str, first_code: datetime) -> float | None:
    """Seconds from the first code to the end of the campaign's fan-out (None: not over)."""
    from campaigns.models import Campaign

    for campaign in Campaign.objects.exclude(fanned_out_at=None):
        if campaign.event_id_prefix == prefix:
            return (campaign.fanned_out_at - first_code).total_seconds()
    return None


def campaign_left(prefix: str, until: datetime, members: int) -> int:
    """How many of the campaign's `members` emails had not been sent by `until`."""
    from deliveries.models import Delivery

    sent = Delivery.objects.filter(
        notification__event_id__startswith=prefix,
        channel="email",
        status="delivered",
        finished_at__lte=until,
    ).count()
    return max(0, members - sent)


_dead_checked = [0.0]  # when the dead-letter queue was last looked at (monotonic)


def check(procs: list[Proc]) -> None:
    """Fail early when a process died or (looked at once a second) a task was
    dead-lettered because it raised."""
    from config.celery import app

    for proc in procs:
        proc.check()
    if time.monotonic() - _dead_checked[0] < 1.0:
        return
    _dead_checked[0] = time.monotonic()
    with app.connection_for_read() as conn:
        _, dead, _ = conn.default_channel.queue_declare(queue="dead_letter", passive=True)
    if dead:
        raise BenchError(f"{dead} task(s) dead-lettered; see var/bench/s3-*.log")
