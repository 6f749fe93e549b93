"""`manage.py analytics_ship`: the `analytics` process (the Procfile's), the store's only
writer: ships events from PostgreSQL into the store and, with the embedded store,
answers the other processes' reads."""

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from django.conf import settings
from django.core.management.base import BaseCommand

from analytics.store.backend import EmbeddedStore, store_open
from analytics.store.reader import reader_start
from analytics.store.schema import schema_ensure
from analytics.store.shipper import ship_forever
from flow.priority import low_work_done, low_work_yield
from notify.checks import process_exit_on_weak_secret_key
from notify.relay import stop_on_signals


class Command(BaseCommand):
    help = "Ship delivery events into the analytics store (runs until SIGTERM)."

    def handle(self, *args, **options) -> None:
        process_exit_on_weak_secret_key(process="analytics")
        store = store_open(owner=True)
        schema_ensure(store)
        if isinstance(store, EmbeddedStore) and settings.NOTIFY_ANALYTICS_READER_ADDRESS:
            reader_start(store=store, address=settings.NOTIFY_ANALYTICS_READER_ADDRESS)
        self.stdout.write("analytics: shipping", ending="\n")
        self.stdout.flush()
        ship_forever(
            store=store, should_stop=stop_on_signals(), sleep=time.sleep, turn=campaign_turn
        )


@contextmanager
def campaign_turn(sleep: Callable[[float], None] = time.sleep) -> Iterator[None]:
    """A shipping round is campaign work: it waits while login codes are in flight on
    this host, then takes a campaign turn (`flow.priority`), which it gives back after.
    Its figures may lag by contract; a login code may not, and niced, a round's
    PostgreSQL DELETE and the store's insert still ran beside the codes in flight."""
    low_work_yield(sleep=sleep)
    try:
        yield
    finally:
        low_work_done()
