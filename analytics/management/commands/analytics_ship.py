"""`manage.py analytics_ship`: the `analytics` process (the Procfile's), the store's only
writer: ships events from PostgreSQL into the store and, with the embedded store,
answers the other processes' reads."""

import time

from django.conf import settings
from django.core.management.base import BaseCommand

from analytics.store.backend import EmbeddedStore, store_open
from analytics.store.reader import reader_start
from analytics.store.schema import schema_ensure
from analytics.store.shipper import ship_forever
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
        ship_forever(store=store, should_stop=stop_on_signals(), sleep=time.sleep)
