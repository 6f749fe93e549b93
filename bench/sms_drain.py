"""S11: SMS drained by the shipped worker vs a bare windowed SMPP client, into the same
local SMSC.

The SMSC is the test suite's (tests/deliveries/sms/smsc.py, in this process): it answers each
submit_sm after BENCH_S11_SMSC_DELAY seconds (0.02: an SMSC nearby), reading the
submits behind it meanwhile, and sends a delivery receipt for each message, as a real
one does. BENCH_S11_SMS people (2,000), each with a phone, get one
`security.login_code` event each by SMS, preloaded through the API with the worker
stopped; then scripts/worker.sh high and the outbox relay are started and timed from
the first routed event to the last delivery final (bench/pipeline_drains.py).

Baseline (bench/sms_bare.py, a process of its own, first submit -> last
submit_sm_resp): one bind, the same SMPP_WINDOW_SIZE (10) submits outstanding, the
same texts encoded by the project's own code into the same submit_sm PDUs (smpplib's),
the receipts answered. The provider rate limit (NOTIFY_RATE_SMPP) and the bind's own
pace (SMPP_TPS) are lifted: a capacity figure, not the configured pace. BENCH_RUNS of
each, alternating, baseline first; medians. Worker start-up is on a line of its own.
"""

from __future__ import annotations

import statistics
from typing import TYPE_CHECKING

from bench.config import S11_TARGET, env_float, env_int
from bench.costs import costs_text, median_costs
from bench.pipeline_drains import Drain, pipeline_run, worker_cpu_line
from bench.push_drain import Bare, bare_client_run
from bench.report import phase, ratio, verdict

if TYPE_CHECKING:
    from bench.runner import Bench

PEOPLE = "bench-s11-"
CATEGORY = "security.login_code"
TEXT = "Your login code: {code}"  # the demo's en SMS template (deliveries/support/demo.py)
SYSTEM_ID, PASSWORD = "bench-s11", "bench11"  # SMPP passwords: at most 8 characters
SOURCE = "Notify"  # SMPP_SOURCE_ADDR's default
WINDOW = 10  # SMPP_WINDOW_SIZE's default
LIFTED = "1000000:1000000"


def scenario_s11(bench: Bench) -> None:
    """BENCH_RUNS bare SMPP drains and worker drains, alternating; print the ratio."""
    from tests.deliveries.sms.smsc import Smsc

    n = max(1, env_int("BENCH_S11_SMS", 2000))
    delay = env_float("BENCH_S11_SMSC_DELAY", 0.02)
    smsc = Smsc(system_id=SYSTEM_ID, password=PASSWORD)
    smsc.start()
    smsc.submit_delay = delay
    try:
        with phase(f"S11: seeding {n} people with a phone"):
            users, phones = _seed(n)
        bench.close_db()
        env = {
            **bench.env,
            "SMPP_HOST": "127.0.0.1",
            "SMPP_PORT": str(smsc.port),
            "SMPP_SYSTEM_ID": SYSTEM_ID,
            "SMPP_PASSWORD": PASSWORD,
            "SMPP_WINDOW_SIZE": str(WINDOW),
            "SMPP_TPS": "1000000",
            "NOTIFY_RATE_SMPP": LIFTED,
            "NOTIFY_CHANNELS_ENABLED": "inapp,email,sms",
        }
        spec = {
            "host": "127.0.0.1",
            "port": smsc.port,
            "system_id": SYSTEM_ID,
            "password": PASSWORD,
            "window": WINDOW,
            "source": SOURCE,
            "messages": [
                {"to": phone, "text": TEXT.format(code=f"{number % 1000000:06d}")}
                for number, phone in enumerate(phones)
            ],
        }
        bares: list[Bare] = []
        drains: list[Drain] = []
        windows: list[tuple[int, int]] = []
        for run in range(bench.config.runs):
            with phase(f"S11 run {run + 1} of {bench.config.runs}"):
                smsc.reset()
                smsc.submit_delay = delay
                bares.append(_bare(spec, n))
                bare_window = smsc.most_outstanding
                smsc.reset()
                smsc.submit_delay = delay
                drains.append(
                    pipeline_run(
                        bench,
                        env,
                        n,
                        True,
                        category=CATEGORY,
                        channels=("sms",),
                        users=users,
                        queue="high",
                        label="S11",
                    )
                )
                windows.append((bare_window, smsc.most_outstanding))
    finally:
        smsc.stop()
        bench.close_db()
    _report(n, delay, bares, drains, windows)


def _report(
    n: int, delay: float, bares: list[Bare], drains: list[Drain], windows: list[tuple[int, int]]
) -> None:
    subject = statistics.median(d.rate for d in drains)
    baseline = statistics.median(b.rate for b in bares)
    value = ratio(subject, baseline)
    print(
        f"S11 SMS drain: {value:.3g}x a bare windowed SMPP client ({subject:.0f} SMS/s vs "
        f"{baseline:.0f}/s; {n} SMS to {n} people, one each, to the local SMSC answering "
        f"each submit after {delay * 1000:g} ms and sending receipts; worker: "
        f"scripts/worker.sh high + outbox relay, first routed event -> last delivery final; "
        f"bare: one bind, window {WINDOW}, first submit -> last submit_sm_resp; "
        f"NOTIFY_RATE_SMPP and SMPP_TPS lifted for a capacity figure; medians of "
        f"{len(drains)}; {verdict(value, S11_TARGET, at_least=True)})"
    )
    print(
        f"S11 worker start-up (not in the ratio): worker start -> first routed event "
        f"{statistics.median(d.startup for d in drains):.1f} s"
    )
    print(
        f"S11 most submits outstanding at the SMSC: bare {max(w[0] for w in windows)}, "
        f"worker {max(w[1] for w in windows)}"
    )
    costs = [d.costs for d in drains if d.costs]
    if costs:
        print(f"S11 per SMS (intake + worker + relay): {costs_text(median_costs(costs))}")
    if line := worker_cpu_line("S11", "SMS", drains):
        print(line)
    for b in bares:
        if set(b.statuses) != {"0"}:
            print(f"S11: WARNING the bare client got command statuses {b.statuses}")


def _bare(spec: dict, n: int) -> Bare:
    """Run bench/sms_bare.py on `spec` in a process of its own; its drain."""
    return bare_client_run(["bench.sms_bare"], spec, n, jobs="s11-sms", what="the bare SMPP client")


def _seed(n: int) -> tuple[list[str], list[str]]:
    """n people with a phone each (created once, kept between runs); ids and phones."""
    from notify.models import Recipient

    users = [f"{PEOPLE}{number}" for number in range(n)]
    phones = [f"+7997{number:07d}" for number in range(n)]
    Recipient.objects.bulk_create(
        [Recipient(user_id=u, phone=p, locale="en") for u, p in zip(users, phones, strict=True)],
        ignore_conflicts=True,
    )
    return users, phones
