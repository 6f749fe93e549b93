"""Erasure reaches the archive: after a person is erased, no archived file holds their
email, phone, user id or payloads (in its raw bytes or its decoded values), their live
rows are gone, and a restore does not bring them back. An erasure whose archive part did
not run is finished by retention."""

from __future__ import annotations

from pathlib import Path

import pytest

from campaigns.erasure import person_erase
from deliveries.models import Delivery, DeliveryAttempt
from history.archive import archive_erase_recipient, file_read_digest
from history.models import ArchivedMonth
from history.restore import month_restore
from history.retention import retention_run, retention_status
from notify.models import ErasureVia, FeedEntry, Notification
from tests.history.conftest import months_back
from tests.history.factories import archived_text, notifications_in, person

EMAIL, PHONE, USER_ID, SECRET = "Erin.Erased@example.org", "+15550109999", "erin-7f3a", "ZQX-91"
PERSONAL = [EMAIL, PHONE, USER_ID, SECRET]


def found(archive: Path) -> set[str]:
    raw, decoded = archived_text(archive)
    return {v for v in PERSONAL if v.encode() in raw} | {v for v in PERSONAL if v in decoded}


@pytest.fixture
def erin_in_the_archive(db, archive, clock):
    """Erin has notifications in an archived month and in this month; Finn shares the
    archived month."""
    erin = person(USER_ID, email=EMAIL, phone=PHONE)
    finn = person("finn")
    old = months_back(clock, 4)
    notifications_in(erin, old, count=2, secret=SECRET)
    notifications_in(finn, old, count=2)
    notifications_in(erin, months_back(clock, 0), count=1, secret=SECRET)
    assert list(retention_run(now=clock).archived) == [f"{old:%Y-%m}"]
    raw, decoded = archived_text(archive)
    # What there is to erase: the scans can fail this test.
    assert all(value in decoded for value in PERSONAL)
    assert all(value.encode() in raw for value in PERSONAL)
    return erin, old


def test_after_erasure_no_archived_file_holds_the_person_and_restore_leaves_them_out(
    erin_in_the_archive, archive, django_capture_on_commit_callbacks
):
    erin, old = erin_in_the_archive
    with django_capture_on_commit_callbacks(execute=True):
        person_erase(user_id=USER_ID, via=ErasureVia.COMMAND, requested_by="test")

    assert found(archive) == set()
    assert not Notification.objects.filter(recipient_id=erin.pk).exists()
    assert not Delivery.objects.filter(recipient_id=erin.pk).exists()
    record = ArchivedMonth.objects.get(month=old)
    assert record.files["notify_notification"]["rows"] == 2
    assert record.files["deliveries_deliveryattempt"]["rows"] == 4
    for entry in record.files.values():
        checked = file_read_digest(entry["url"])
        assert (checked.rows, checked.sha256) == (entry["rows"], entry["sha256"])
    assert not list(archive.rglob("*.new"))

    report = month_restore(month=old)

    assert report.inserted["notify_notification"] == 2
    assert set(Notification.objects.values_list("recipient__user_id", flat=True)) == {"finn"}
    assert not FeedEntry.objects.filter(recipient_id=erin.pk).exists()
    assert DeliveryAttempt.objects.count() == 4
    assert archive_erase_recipient(erin.pk) == 0  # idempotent


def test_restore_applies_the_ledger_even_to_files_that_still_hold_the_person(
    erin_in_the_archive, archive, django_capture_on_commit_callbacks
):
    erin, old = erin_in_the_archive
    # The archive part of the erasure has not run (the process stopped after commit).
    with django_capture_on_commit_callbacks(execute=False):
        person_erase(user_id=USER_ID, via=ErasureVia.COMMAND, requested_by="test")
    assert found(archive) == set(PERSONAL)

    report = month_restore(month=old)

    assert report.in_archive["notify_notification"] == 4
    assert report.inserted["notify_notification"] == 2
    assert not Notification.objects.filter(recipient_id=erin.pk).exists()
    assert not Delivery.objects.filter(target__in=[EMAIL, PHONE]).exists()


def test_an_erasure_whose_archive_part_did_not_run_is_finished_by_retention(
    erin_in_the_archive, archive, clock, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=False):
        person_erase(user_id=USER_ID, via=ErasureVia.COMMAND, requested_by="test")
    assert retention_status(now=clock).months_erasure_pending == 1

    report = retention_run(now=clock)

    assert report.archive_rows_erased == 2 + 2 + 4 + 4
    assert found(archive) == set()
    assert retention_status(now=clock).months_erasure_pending == 0
    assert retention_run(now=clock).archive_rows_erased == 0
