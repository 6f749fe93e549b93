"""Publish the pending outbox rows, then die by SIGKILL before the transaction that
marks them published commits: the crash a relay can have between the broker's confirm
and its database commit."""

import os
import signal

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.settings")
django.setup()

from django.db import transaction  # noqa: E402

from notify.relay import outbox_publish_pending  # noqa: E402


def main() -> None:
    with transaction.atomic():
        published = outbox_publish_pending()
        assert published, "nothing was pending"
        os.kill(os.getpid(), signal.SIGKILL)


if __name__ == "__main__":
    main()
