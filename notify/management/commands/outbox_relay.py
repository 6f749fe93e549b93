"""`manage.py outbox_relay`: the process that publishes accepted notifications."""

from django.core.management.base import BaseCommand

from notify.checks import process_exit_on_weak_secret_key
from notify.relay import relay_forever, stop_on_signals


class Command(BaseCommand):
    help = "Publish route tasks for accepted notifications (runs until SIGTERM)."

    def handle(self, *args, **options) -> None:
        process_exit_on_weak_secret_key(process="outbox_relay")
        relay_forever(should_stop=stop_on_signals())
