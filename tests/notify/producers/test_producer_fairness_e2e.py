"""One producer's flood does not hold up another producer's notifications of the same
class: through a real worker, the real outbox relay and the SMTP peer, at the default
SMTP rate (50/s), producer B's 40 emails go out within a few seconds while producer A's
6,000 drain behind them, and every one of A's arrives once. A posts from a process of its
own, as a real team's client would (tests/notify/producers/flood_client.py says why)."""

from __future__ import annotations

import math
import subprocess
import sys
import time
from collections import Counter

import pytest
from rest_framework.test import APIClient

from notify.api_keys import api_key_issue
from notify.models import Recipient
from tests.notify.producers.flood_client import order_events
from tests.processes import ROOT, stop_child
from tests.scheduling import MEASURED, turn_signal
from tests.waiting import wait_for

# Alone: it times one producer's emails against its own idle figure, and the suite's
# other test processes (each with its own workers) would make both figures the machine's.
# The other `alone` tests wait until it has measured (tests/scheduling.py).
pytestmark = [pytest.mark.e2e, pytest.mark.alone]

FLOOD = 6000
FLOOD_BATCH = 1000  # the batch endpoint's most
FEW = 40
# B posts this long after A's first batch.
HEAD_START = 2.0
# B's p90 under the flood may be this many times its idle p90, or this many seconds.
RATIO_BOUND = 3.0
FLOOR_SECONDS = 2.0


def p90(values: list[float]) -> float:
    """The 90th percentile (nearest rank)."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(0.9 * len(ordered)) - 1)]


def producer_key(name: str) -> str:
    """A key of a producer of its own, allowed a batch's peak at the API."""
    issued = api_key_issue(producer_name=name)
    issued.api_key.rate_per_second = 10_000
    issued.api_key.rate_burst = 10_000
    issued.api_key.save(update_fields=["rate_per_second", "rate_burst"])
    return issued.key


def producer_client(name: str) -> APIClient:
    """An API client with a key of its own producer (`producer_key`)."""
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {producer_key(name)}")
    return client


def people_create(prefix: str, count: int) -> list[str]:
    """`count` recipients with an email address each; their user ids."""
    ids = [f"{prefix}-{i:04d}" for i in range(count)]
    Recipient.objects.bulk_create(
        Recipient(user_id=user_id, email=f"{user_id}@example.com", locale="en") for user_id in ids
    )
    return ids


def post_batch(client: APIClient, user_ids: list[str], tag: str) -> float:
    """One batch of order.shipped emails, one per person; when it was accepted (epoch s)."""
    events = order_events(user_ids, tag=tag)
    response = client.post("/v1/notifications/batch", {"events": events}, format="json")
    assert response.status_code == 200, response.content
    assert {r["status"] for r in response.json()["results"]} == {202}
    return time.time()


def arrival_seconds(smtp, user_ids: list[str], accepted_at: float) -> list[float]:
    """Seconds from acceptance to the SMTP peer's receipt, for each of these people's
    emails that arrived."""
    wanted = {f"{user_id}@example.com" for user_id in user_ids}
    return [mail.received_at - accepted_at for mail in smtp.received if mail.rcpt_tos[0] in wanted]


def arrived(smtp, user_ids: list[str]) -> int:
    wanted = {f"{user_id}@example.com" for user_id in user_ids}
    return sum(1 for mail in smtp.received if mail.rcpt_tos[0] in wanted)


def stages_print(smtp, user_ids: list[str], label: str) -> None:
    """Where these people's emails spent their time (p50 / p90 of each step, seconds):
    accepted -> published by the relay -> routed -> claimed by a sender -> SMTP receipt."""
    from deliveries.models import Delivery

    received = {mail.rcpt_tos[0]: mail.received_at for mail in smtp.received}
    steps: dict[str, list[float]] = {"published": [], "routed": [], "claimed": [], "smtp": []}
    deliveries = Delivery.objects.filter(
        notification__recipient__user_id__in=user_ids, channel="email"
    ).values_list(
        "notification__created_at",
        "notification__outbox__published_at",
        "notification__routed_at",
        "claimed_at",
        "notification__recipient__email",
    )
    for accepted, published, routed, claimed, email in deliveries:
        if None in (published, routed, claimed) or email not in received:
            continue
        steps["published"].append((published - accepted).total_seconds())
        steps["routed"].append((routed - published).total_seconds())
        steps["claimed"].append((claimed - routed).total_seconds())
        steps["smtp"].append(received[email] - claimed.timestamp())
    print(
        f"{label}: "
        + ", ".join(
            f"{step} {sorted(values)[len(values) // 2]:.2f}/{p90(values):.2f}"
            for step, values in steps.items()
            if values
        )
    )


def test_a_producers_flood_leaves_another_producers_emails_fast_and_sends_its_own_once(
    demo_data, pipeline, workers_with, settings, worker_env
):
    smtp = pipeline
    settings.NOTIFY_AUTH_CACHE_SECONDS = 5  # production's: a batch's intake at its pace
    workers_with(count=1, pool="threads", concurrency=8)
    flood_key, few = producer_key("flood-a"), producer_client("few-b")
    a_people = people_create("a", FLOOD)
    b_idle_people = people_create("bidle", FEW)
    b_people = people_create("b", FEW)

    # B alone: its idle p90.
    idle_accepted = post_batch(few, b_idle_people, "idle")
    wait_for(lambda: arrived(smtp, b_idle_people) >= FEW, timeout=60, what="B's idle emails")
    idle_p90 = p90(arrival_seconds(smtp, b_idle_people, idle_accepted))
    stages_print(smtp, b_idle_people, "B idle, step by step (p50/p90 s)")
    time.sleep(2.5)  # the provider's bucket fills again

    # A floods in batches from its own process; B posts its 40 two seconds after A began.
    flood = subprocess.Popen(
        [sys.executable, "-m", "tests.notify.producers.flood_client", flood_key, "a",
         str(FLOOD), str(FLOOD_BATCH)],
        env={**worker_env, "NOTIFY_AUTH_CACHE_SECONDS": "5"},
        cwd=ROOT, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        started = float(flood.stdout.readline())  # A is about to post its first batch
        time.sleep(max(0.0, started + HEAD_START - time.time()))
        b_accepted = post_batch(few, b_people, "few")
        wait_for(lambda: arrived(smtp, b_people) >= FEW, timeout=300, what="B's emails")
        b_p90 = p90(arrival_seconds(smtp, b_people, b_accepted))
        assert flood.wait(timeout=120) == 0, "A's client failed (its error is above)"
        a_accepted = [float(line) - started for line in flood.stdout]
    finally:
        stop_child(flood)
    turn_signal(MEASURED)  # what is left, A's drain at 50/s, leaves the CPU idle
    print(f"\nA's batches accepted {', '.join(f'{t:.2f}' for t in a_accepted)} s after A began")
    print(f"B idle p90 {idle_p90:.2f} s; B p90 under A's flood {b_p90:.2f} s")
    stages_print(smtp, b_people, "B under A's flood, step by step (p50/p90 s)")

    bound = max(RATIO_BOUND * idle_p90, FLOOR_SECONDS)
    assert b_p90 <= bound, (
        f"B's p90 {b_p90:.2f} s behind A's flood, over {bound:.2f} s (idle p90 {idle_p90:.2f} s)"
    )

    # All of A's arrive, none twice.
    wait_for(lambda: arrived(smtp, a_people) >= FLOOD, timeout=400, what="all of A's emails")
    time.sleep(1.0)  # a late duplicate would show up by now
    counts = Counter(
        mail.rcpt_tos[0] for mail in smtp.received if mail.rcpt_tos[0].startswith("a-")
    )
    drained = max(arrival_seconds(smtp, a_people, started))
    print(f"A's {FLOOD} drained {drained:.0f} s after A began ({FLOOD / drained:.0f}/s)")
    assert len(counts) == FLOOD
    assert [address for address, n in counts.items() if n > 1] == []
