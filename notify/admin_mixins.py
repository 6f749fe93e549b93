"""What every app's admin shares. It lives in notify, the ground floor, because every app
may import notify and none may import another app above it (.importlinter)."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest


class ReadOnlyAdminMixin:
    """A page (or inline) of records nobody adds, edits or deletes in admin: evidence and
    records the platform writes itself. Put it before the admin class in the bases.

    `deletable = True` keeps deleting as the user's permissions allow, for records that
    may be cleaned up but never altered.
    """

    deletable = False

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return self.deletable and super().has_delete_permission(request, obj)
