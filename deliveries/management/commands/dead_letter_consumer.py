"""`manage.py dead_letter_consumer`: the process that moves dead letters into the table."""

from django.core.management.base import BaseCommand

from deliveries.pipeline.dead_letters import dead_letters_consume_forever
from notify.checks import process_exit_on_weak_secret_key
from notify.relay import stop_on_signals


class Command(BaseCommand):
    help = "Drain the dead_letter queue into the Dead letters table (runs until SIGTERM)."

    def handle(self, *args, **options) -> None:
        process_exit_on_weak_secret_key(process="dead_letter_consumer")
        dead_letters_consume_forever(should_stop=stop_on_signals())
