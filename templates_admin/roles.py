"""Staff roles for templates: editors draft and preview, publishers publish.

`notify`'s `create_roles` command can call these; they are idempotent.
"""

from __future__ import annotations

from django.contrib.auth.models import Group, Permission

EDITOR_GROUP = "Templates: editor"
PUBLISHER_GROUP = "Templates: publisher"
EDITOR_CODENAMES = (
    "view_template",
    "view_templateversion",
    "add_templateversion",
    "view_templatepublication",
)


def _group(name: str, codenames: tuple[str, ...]) -> Group:
    group, _ = Group.objects.get_or_create(name=name)
    group.permissions.set(
        Permission.objects.filter(content_type__app_label="templates_admin", codename__in=codenames)
    )
    return group


def template_editor_group_ensure() -> Group:
    """Marketing editors: see templates, save drafts, preview, send tests to themselves."""
    return _group(EDITOR_GROUP, EDITOR_CODENAMES)


def template_publisher_group_ensure() -> Group:
    """Publishers: everything an editor does, and publish (which is also rollback)."""
    return _group(PUBLISHER_GROUP, (*EDITOR_CODENAMES, "publish_templateversion"))
