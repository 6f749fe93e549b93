"""Intake rate and event-to-delivery latency on the local stack.

Run `make run` in another terminal first (the workers do the delivering), then
`make bench`. Uses the local database named by DATABASE_URL, a producer `bench`, and a
recipient `bench-user` whose email goes to the stack's mail sink.
"""

from __future__ import annotations

import os
import statistics
import sys
import time
import uuid

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "notify.settings")
django.setup()

from django.db.models import F  # noqa: E402
from django.test import Client  # noqa: E402

from deliveries.models import FINAL_STATUSES, Delivery  # noqa: E402
from notify.models import Recipient  # noqa: E402
from notify.services import api_key_issue  # noqa: E402

EVENTS = int(os.environ.get("BENCH_EVENTS", "300"))
WAIT_SECONDS = float(os.environ.get("BENCH_WAIT_SECONDS", "120"))


def main() -> int:
    key = api_key_issue(producer_name="bench").key
    Recipient.objects.update_or_create(
        user_id="bench-user", defaults={"email": "bench@example.com", "locale": "en"}
    )
    client = Client(HTTP_AUTHORIZATION=f"Bearer {key}")
    run = uuid.uuid4().hex[:8]
    started = time.perf_counter()
    ids = []
    for number in range(EVENTS):
        response = client.post(
            "/v1/notifications",
            {
                "event_id": f"bench-{run}-{number}",
                "user_id": "bench-user",
                "category": "order.shipped",
                "channels": ["inapp", "email"],
                "payload": {"order_number": str(number), "delivery_date": "2026-12-03",
                            "items_count": 1},
            },
            content_type="application/json",
        )  # fmt: skip
        if response.status_code != 202:
            print(f"POST failed: {response.status_code} {response.content!r}", file=sys.stderr)
            return 1
        ids.append(response.json()["notification_id"])
    intake = time.perf_counter() - started
    print(f"intake: {EVENTS} events in {intake:.2f} s = {EVENTS / intake:.0f} events/s "
          "(in-process client, one connection, publisher confirms on)")  # fmt: skip

    deliveries = Delivery.objects.filter(notification_id__in=ids)
    deadline = time.monotonic() + WAIT_SECONDS
    while deliveries.exclude(status__in=FINAL_STATUSES).exists():
        if time.monotonic() > deadline:
            print("not all delivered in time: are the workers running (`make run`)?")
            return 1
        time.sleep(0.2)
    for channel in ("inapp", "email"):
        latencies = sorted(
            (row["finished_at"] - row["created"]).total_seconds() * 1000
            for row in deliveries.filter(channel=channel, status="delivered")
            .annotate(created=F("notification__created_at"))
            .values("finished_at", "created")
        )
        if not latencies:
            print(f"{channel}: nothing delivered")
            continue
        p95 = latencies[int(len(latencies) * 0.95) - 1]
        median = statistics.median(latencies)
        print(
            f"{channel}: {len(latencies)} delivered; event→delivery ms "
            f"p50 {median:.0f}, p95 {p95:.0f}, max {latencies[-1]:.0f}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
