"""Staff roles for templates: editors draft and preview, publishers publish.

`notify`'s `create_roles` command can call these; they are idempotent.
"""

from __future__ import annotations

from django.contrib.auth.models import Group, Permission
from django.db.models import Q

EDITOR_GROUP = "Templates: editor"
PUBLISHER_GROUP = "Templates: publisher"
EDITOR_CODENAMES = (
    "view_template",
    # A template for a new locale (or channel) of a category; never delete one.
    "add_template",
    "view_templateversion",
    "add_templateversion",
    "view_templatepublication",
)
# Editors keep the seed lists and send drafts and campaigns not started to them (the
# campaigns app's permissions, named here so the groups stay in one place).
SEED_LIST_CODENAMES = (
    "view_seedlist",
    "add_seedlist",
    "change_seedlist",
    "delete_seedlist",
    "send_to_seed_list",
)


def _group(name: str, codenames: tuple[str, ...]) -> Group:
    group, _ = Group.objects.get_or_create(name=name)
    group.permissions.set(
        Permission.objects.filter(
            Q(content_type__app_label="templates_admin", codename__in=codenames)
            | Q(content_type__app_label="campaigns", codename__in=SEED_LIST_CODENAMES)
        )
    )
    return group


def template_editor_group_ensure() -> Group:
    """Marketing editors: see templates, add one for a new locale, save drafts, preview,
    send tests to themselves, keep seed lists and send tests to them."""
    return _group(EDITOR_GROUP, EDITOR_CODENAMES)


def template_publisher_group_ensure() -> Group:
    """Publishers: everything an editor does, and publish (which is also rollback)."""
    return _group(PUBLISHER_GROUP, (*EDITOR_CODENAMES, "publish_templateversion"))
