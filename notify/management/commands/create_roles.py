"""`manage.py create_roles`: (re)create the staff groups the platform defines."""

from django.core.management.base import BaseCommand

from notify.roles import redrive_group_ensure, support_group_ensure


class Command(BaseCommand):
    help = "Create or refresh the Support (read-only) and Support: re-drive groups."

    def handle(self, *args, **options) -> None:
        for group in (support_group_ensure(), redrive_group_ensure()):
            self.stdout.write(f"Group {group.name!r}: {group.permissions.count()} permissions")
