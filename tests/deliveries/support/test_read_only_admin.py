"""Evidence in admin is read-only, even for a superuser: no page adds, edits or deletes the
erasure ledger, consent history, archived months or template publications; dead letters,
digests and notifications may be deleted but never added or edited."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.django_db

NEVER_DELETED = (
    "notify/erasure",
    "preferences/consentrecord",
    "preferences/preference",
    "history/archivedmonth",
    "templates_admin/templatepublication",
)
DELETABLE = ("deliveries/deadletter", "deliveries/digestwindow", "notify/notification")


@pytest.mark.parametrize("page", NEVER_DELETED + DELETABLE)
def test_a_superuser_cannot_add_evidence(admin_client, page):
    assert admin_client.get(f"/admin/{page}/add/").status_code == 403
    changelist = admin_client.get(f"/admin/{page}/")
    assert changelist.status_code == 200
    assert f'href="/admin/{page}/add/"' not in changelist.content.decode()


@pytest.mark.parametrize("page", NEVER_DELETED)
def test_a_superuser_cannot_delete_evidence(admin_client, page):
    # Permission is checked before the record is looked up: refused, not "not found".
    assert admin_client.get(f"/admin/{page}/1/delete/").status_code == 403


@pytest.mark.parametrize("page", DELETABLE)
def test_records_that_may_be_cleaned_up_can_still_be_deleted(admin_client, page):
    # Allowed, so the missing record is what stops it: back to the admin with a message.
    assert admin_client.get(f"/admin/{page}/1/delete/").status_code == 302
