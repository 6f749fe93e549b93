"""Accept one event, then die by SIGKILL after the commit and before the publish.

Run as its own process by the outbox test: the same crash a web process can have
between its database commit and its broker publish.
"""

import os
import signal
import sys

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.settings")
django.setup()

from django.db import transaction  # noqa: E402

from notify.models import Category, Producer  # noqa: E402
from notify.services import notification_accept  # noqa: E402


def main(producer_name: str, user_id: str, event_id: str) -> None:
    with transaction.atomic():
        # Registered first, so it runs right after COMMIT and before the publish callback.
        transaction.on_commit(lambda: os.kill(os.getpid(), signal.SIGKILL))
        notification_accept(
            producer=Producer.objects.get(name=producer_name),
            event_id=event_id,
            user_id=user_id,
            category=Category.objects.get(key="order.shipped"),
            payload={"order_number": "K-9", "delivery_date": "2026-12-03", "items_count": 1},
            channels=["email"],
            ttl_seconds=None,
        )


if __name__ == "__main__":
    main(*sys.argv[1:4])
