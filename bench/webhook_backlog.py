"""S9: login codes (high queue) delivered by email while status webhook events wait.

As S3, on the shipped processes (scripts/worker.sh high and low, the relays), email to
an SMTP sink. Idle (baseline): nobody subscribes. Busy (subject): the bench producer
subscribes to `delivery.delivered` (so every code's outcome also writes its event, the
hot-path cost) on a loopback receiver that answers each post after
BENCH_S9_RECEIVER_DELAY s, and BENCH_S9_EVENTS events are pending for it, their post
messages queued on `low`, before the codes start. The figure is the p99 of
Delivery.finished_at - Notification.created_at of BENCH_LOGIN_CODES codes, busy over
idle, medians of BENCH_RUNS alternating runs.
"""

from __future__ import annotations

import os
import statistics
import time
from typing import TYPE_CHECKING

from bench.config import DEMO_USER
from bench.login_code_steps import DETAILS, STAGES
from bench.login_codes import (
    INTERVAL,
    code_recipients,
    code_stages,
    post_code,
    wait_emails,
    wait_ready,
)
from bench.processes import python, start_smtp_sink, wait_port
from bench.report import percentile, phase, ratio, verdict
from scripts.ports import unused_port

if TYPE_CHECKING:
    from bench.runner import Bench


def scenario_s9(bench: Bench) -> None:
    """Time login codes idle and with a webhook backlog, alternating; print the ratio."""
    events = int(os.environ.get("BENCH_S9_EVENTS", "10000"))
    delay = float(os.environ.get("BENCH_S9_RECEIVER_DELAY", "0.05"))
    port = unused_port()
    # The receiver stands for another host: its own process, niced, so its CPU is not
    # counted against the login codes on this 2-core machine.
    receiver = bench.stack.start(
        "s9-receiver",
        ["nice", "-n", "19", python(), "-m", "tests.peers.webhooks", str(port), str(delay)],
        bench.env,
    )
    wait_port(port, receiver)
    url = f"http://127.0.0.1:{port}/hooks"
    with phase(f"S9: {bench.config.login_codes} code recipients"):
        users = code_recipients(bench.config.login_codes)
    bench.close_db()
    sink, env = start_smtp_sink(bench.stack, bench.env)
    env = {**env, "NOTIFY_WEBHOOK_ALLOWED_PRIVATE_ORIGINS": f"http://127.0.0.1:{port}"}
    idle: list[list[float]] = []
    busy: list[list[float]] = []
    stages: dict[str, list[dict]] = {"idle": [], "busy": []}
    left: list[int] = []
    try:
        for run in range(bench.config.runs):
            latencies, _, steps = _codes(bench, env, f"idle{run}", users, None, events)
            idle.append(latencies)
            stages["idle"].append(steps)
            latencies, pending, steps = _codes(bench, env, f"busy{run}", users, url, events)
            busy.append(latencies)
            left.append(pending)
            stages["busy"].append(steps)
    finally:
        bench.stack.stop(sink)
        bench.stack.stop(receiver)
        _reset(bench)
    idle_p99 = statistics.median(percentile(c, 0.99) for c in idle) * 1000
    busy_p99 = statistics.median(percentile(c, 0.99) for c in busy) * 1000
    value = ratio(busy_p99, idle_p99)
    print(
        f"S9 login code while {events} status webhook events are pending: p99 {value:.3g}x "
        f"idle ({busy_p99:.0f} ms vs {idle_p99:.0f} ms, event -> email delivered, "
        f"{bench.config.login_codes} codes 100 ms apart; receiver answers in {delay:g} s; "
        f"{verdict(value, 2, at_least=False)})"
    )
    print(f"S9 webhook events still pending at the last code: {left} of {events}")
    if all(stages["idle"] + stages["busy"]):
        parts = []
        for stage in STAGES + DETAILS:
            during = statistics.median(percentile(c[stage], 0.5) for c in stages["busy"]) * 1000
            before = statistics.median(percentile(c[stage], 0.5) for c in stages["idle"]) * 1000
            parts.append(f"{stage} {during:.0f} ms ({before:.0f})")
        print("S9 median per step beside the backlog (idle): " + ", ".join(parts))
    if any(n == 0 for n in left):
        print("S9: WARNING the backlog was gone before the last code; raise BENCH_S9_EVENTS")


def _reset(bench: Bench) -> None:
    from webhooks.models import WebhookEndpoint

    WebhookEndpoint.objects.all().delete()
    bench.close_db()


def _backlog(url: str, events: int) -> None:
    """Subscribe the bench producer on `url` and queue `events` pending events for it."""
    from django.db import connection
    from django.test import override_settings

    from notify.models import Producer
    from webhooks.endpoints import endpoint_create
    from webhooks.events import webhook_posts_publish
    from webhooks.models import WebhookEvent

    origin = url.rsplit("/", 1)[0]
    with override_settings(NOTIFY_WEBHOOK_ALLOWED_PRIVATE_ORIGINS=[origin]):  # as the workers
        endpoint = endpoint_create(
            producer=Producer.objects.get(name="bench"), url=url, event_types=["delivery.delivered"]
        )
    with connection.cursor() as cursor:
        cursor.execute(
            f"""INSERT INTO {WebhookEvent._meta.db_table}
                    (endpoint_id, msg_id, event_type, payload, status, attempts,
                     next_attempt_at, enqueued_at, created_at, last_error)
                SELECT %s, 'msg_bench_' || g || '_' || %s, 'delivery.delivered',
                       jsonb_build_object('type', 'delivery.delivered', 'data',
                                          jsonb_build_object('n', g)),
                       'pending', 0, now(), now(), now(), ''
                  FROM generate_series(1, %s) g RETURNING id""",
            [endpoint.pk, time.time_ns(), events],
        )
        ids = [row[0] for row in cursor.fetchall()]
    webhook_posts_publish(by_endpoint={endpoint.pk: ids})


def _codes(
    bench: Bench, env: dict[str, str], name: str, users: list[str], url: str | None, events: int
) -> tuple[list[float], int, dict | None]:
    """One run: processes afresh, a warm-up code, the backlog when `url`, the codes;
    returns their latencies, the events still pending at the last code, and where the
    codes' time went."""
    from django.test import Client

    from webhooks.models import WebhookEvent

    _reset(bench)
    stamp = f"s9-{name}-{time.time_ns()}"
    keys = {queue: f"bench:ready:{stamp}:{queue}" for queue in ("high", "low")}
    procs = [
        bench.stack.start(
            f"s9-worker-{queue}",
            ["bash", "scripts/worker.sh", queue],
            {**env, "BENCH_READY_KEY": key},
        )
        for queue, key in keys.items()
    ]
    for proc_name, queues in (("s9-relay", "high,medium"), ("s9-relay-low", "low")):
        procs.append(bench.stack.start(proc_name, ["bash", "scripts/relay.sh", queues], env))
    client = Client(HTTP_AUTHORIZATION=f"Bearer {bench.api_key}")
    try:
        wait_ready(list(keys.values()), procs)
        if url:
            _backlog(url, events)
        post_code(client, f"{stamp}:warm", 0, DEMO_USER)
        wait_emails(bench, f"{stamp}:warm", 1, procs)
        for number in range(bench.config.login_codes):
            due = time.monotonic() + INTERVAL
            post_code(client, f"{stamp}-{number}", number, users[number % len(users)])
            time.sleep(max(0.0, due - time.monotonic()))
        rows = wait_emails(bench, f"{stamp}-", bench.config.login_codes, procs)
        pending = WebhookEvent.objects.exclude(status="delivered").count()
    finally:
        for proc in procs:
            bench.stack.stop(proc)
        bench.close_db()
    latencies = [(finished - created).total_seconds() for created, _, finished in rows]
    return latencies, pending, code_stages(bench, f"{stamp}-")
