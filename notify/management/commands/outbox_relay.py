"""`manage.py outbox_relay`: the process that publishes accepted notifications."""

from django.core.management.base import BaseCommand, CommandError, CommandParser

from notify.checks import process_exit_on_weak_secret_key
from notify.ops.heap import startup_heap_freeze
from notify.relay import QUEUE_CLASSES, relay_forever, stop_on_signals


class Command(BaseCommand):
    help = "Publish route tasks for accepted notifications (runs until SIGTERM)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--queues",
            default=",".join(QUEUE_CLASSES),
            help="Queue classes to publish, comma-separated, in order (default: all).",
        )

    def handle(self, *args, **options) -> None:
        queues = [q.strip() for q in options["queues"].split(",") if q.strip()]
        unknown = sorted(set(queues) - set(QUEUE_CLASSES))
        if unknown or not queues:
            raise CommandError(
                f"--queues takes {', '.join(QUEUE_CLASSES)}; got {options['queues']!r}"
            )
        process_exit_on_weak_secret_key(process="outbox_relay")
        startup_heap_freeze()
        relay_forever(should_stop=stop_on_signals(), queues=queues)
