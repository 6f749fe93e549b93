"""Staff role for campaigns: managers launch, watch, pause, resume and cancel them."""

from __future__ import annotations

from django.contrib.auth.models import Group, Permission

MANAGER_GROUP = "Campaign managers"
MANAGER_CODENAMES = ("view_campaign", "change_campaign", "launch_campaign")


def campaign_manager_group_ensure() -> Group:
    """The campaign managers group (idempotent). Launching needs `launch_campaign`;
    pause, resume and cancel need `change_campaign`."""
    group, _ = Group.objects.get_or_create(name=MANAGER_GROUP)
    group.permissions.set(
        Permission.objects.filter(
            content_type__app_label="campaigns", codename__in=MANAGER_CODENAMES
        )
    )
    return group
