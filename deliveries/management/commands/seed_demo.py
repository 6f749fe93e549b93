"""`manage.py seed_demo`: demo categories, en/ru templates and recipients; safe to rerun."""

from django.core.management.base import BaseCommand

from deliveries.support.demo import seed_demo


class Command(BaseCommand):
    help = "Create demo categories (with en and ru templates) and demo recipients."

    def handle(self, *args, **options) -> None:
        created = seed_demo()
        self.stdout.write(
            "Demo data ready: "
            + ", ".join(f"{count} new {name}" for name, count in created.items())
        )
