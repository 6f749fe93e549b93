"""`manage.py create_roles`: (re)create the staff groups the platform defines.

It lives in the top app because it gathers every app's roles."""

from django.core.management.base import BaseCommand

from campaigns.roles import campaign_manager_group_ensure
from notify.roles import (
    consent_group_ensure,
    privacy_group_ensure,
    redrive_group_ensure,
    support_group_ensure,
)
from templates_admin.roles import template_editor_group_ensure, template_publisher_group_ensure


class Command(BaseCommand):
    help = (
        "Create or refresh the staff groups: Support (read-only), Support: re-drive, "
        "Support: consent, privacy officers, template editors, template publishers and "
        "campaign managers."
    )

    def handle(self, *args, **options) -> None:
        groups = (
            support_group_ensure(),
            redrive_group_ensure(),
            consent_group_ensure(),
            privacy_group_ensure(),
            template_editor_group_ensure(),
            template_publisher_group_ensure(),
            campaign_manager_group_ensure(),
        )
        for group in groups:
            self.stdout.write(f"Group {group.name!r}: {group.permissions.count()} permissions")
