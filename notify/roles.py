"""Staff roles that the platform defines: support reads everything, edits nothing."""

from __future__ import annotations

from django.contrib.auth.models import Group, Permission

SUPPORT_GROUP = "Support"
REDRIVE_GROUP = "Support: re-drive"
PRIVACY_GROUP = "Privacy officers"
CONSENT_GROUP = "Support: consent"
SUPPORT_APPS = ("notify", "deliveries", "preferences", "templates_admin", "campaigns", "history")


def support_group_ensure() -> Group:
    """The read-only support group with view permission on every platform model."""
    group, _ = Group.objects.get_or_create(name=SUPPORT_GROUP)
    group.permissions.set(
        Permission.objects.filter(
            content_type__app_label__in=SUPPORT_APPS, codename__startswith="view_"
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
