"""A producer's client flooding the batch endpoint from a process of its own.

Run as `python -m tests.notify.producers.flood_client KEY PREFIX COUNT BATCH` with a
worker's environment (the test database) and production's key cache
(NOTIFY_AUTH_CACHE_SECONDS), so a batch is accepted at its real pace. It prints the time
(epoch seconds) just before its first post, then the time each batch was accepted, one
per line.

A separate process because that is where a real team's client is: posted from a thread
of the test process, the flood's intake held that interpreter's lock against the SMTP
peer's thread, so the peer answered the worker late whenever the flood was being
accepted — a coupling no deployment has, and one that moved the other producer's
figures by a second from run to run.
"""

from __future__ import annotations

import sys
import time

import django


def order_events(user_ids: list[str], *, tag: str) -> list[dict]:
    """One order.shipped email event per person, its event id `tag`-user id."""
    return [
        {
            "event_id": f"{tag}-{user_id}",
            "user_id": user_id,
            "category": "order.shipped",
            "channels": ["email"],
            "payload": {"order_number": user_id, "delivery_date": "2026-12-03", "items_count": 1},
        }
        for user_id in user_ids
    ]


def flood_post(*, key: str, prefix: str, count: int, batch: int) -> None:
    """Post `count` order.shipped emails to `prefix`-NNNN people, `batch` a request."""
    from rest_framework.test import APIClient

    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")
    user_ids = [f"{prefix}-{i:04d}" for i in range(count)]
    # A running client's code is loaded: an empty batch (refused) before the clock starts.
    client.post("/v1/notifications/batch", {"events": []}, format="json")
    print(time.time(), flush=True)
    for start in range(0, count, batch):
        events = order_events(user_ids[start : start + batch], tag="flood")
        response = client.post("/v1/notifications/batch", {"events": events}, format="json")
        accepted = response.status_code == 200 and all(
            result["status"] == 202 for result in response.json()["results"]
        )
        if not accepted:
            sys.exit(f"flood batch refused: {response.status_code} {response.content[:500]!r}")
        print(time.time(), flush=True)


if __name__ == "__main__":
    django.setup()
    key, prefix, count, batch = sys.argv[1:5]
    flood_post(key=key, prefix=prefix, count=int(count), batch=int(batch))
