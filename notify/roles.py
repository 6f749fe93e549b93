"""Staff roles that the platform defines: support reads everything, edits nothing."""

from __future__ import annotations

from pathlib import Path

from django.apps import apps
from django.conf import settings
from django.contrib.auth.models import Group, Permission

SUPPORT_GROUP = "Support"
REDRIVE_GROUP = "Support: re-drive"
PRIVACY_GROUP = "Privacy officers"
CONSENT_GROUP = "Support: consent"


def platform_app_labels() -> list[str]:
    """The labels of the project's own apps (those inside the checkout, not Django's or a
    library's), so support reads an app added later without this list naming it."""
    root = Path(settings.BASE_DIR).resolve()
    return [
        config.label
        for config in apps.get_app_configs()
        if Path(config.path).resolve().is_relative_to(root)
        and "site-packages" not in Path(config.path).parts
    ]


def support_group_ensure() -> Group:
    """The read-only support group with view permission on every platform model."""
    group, _ = Group.objects.get_or_create(name=SUPPORT_GROUP)
    group.permissions.set(
        Permission.objects.filter(
            content_type__app_label__in=platform_app_labels(), codename__startswith="view_"
        )
    )
    return group


def redrive_group_ensure() -> Group:
    """Added to a support person who may also act on deliveries: re-drive dead ones (and
    dead-lettered messages), and lift a hard-bounce suppression (delete the entry) once
    the person fixed their address."""
    group, _ = Group.objects.get_or_create(name=REDRIVE_GROUP)
    group.permissions.set(
        Permission.objects.filter(
            content_type__app_label="deliveries",
            codename__in=("redrive_delivery", "delete_addresssuppression", "view_deadletter"),
        )
    )
    return group


def privacy_group_ensure() -> Group:
    """Added to a support person who handles erasure requests: erase a person from
    Recipients in admin (the erase action, or delete, which erases) and read the ledger."""
    group, _ = Group.objects.get_or_create(name=PRIVACY_GROUP)
    group.permissions.set(
        Permission.objects.filter(
            content_type__app_label="notify", codename__in=("erase_recipient", "view_erasure")
        )
    )
    return group


def consent_group_ensure() -> Group:
    """Added to a support person who may record a grant or withdrawal the person gave them
    (by phone, by letter) into the consent history, with their name and a reason."""
    group, _ = Group.objects.get_or_create(name=CONSENT_GROUP)
    group.permissions.set(
        Permission.objects.filter(
            content_type__app_label="preferences", codename="record_consent_by_support"
        )
    )
    return group
