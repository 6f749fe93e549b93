"""`manage.py history_restore --month YYYY-MM [--user-id USER_ID]`: bring an archived month
back into the database for support, all of it or one person's rows, for
NOTIFY_RESTORE_KEEP_DAYS. Erased people are never brought back (docs/history.md)."""

from __future__ import annotations

from datetime import date, datetime

from django.core.management.base import BaseCommand, CommandError

from history.restore import RestoreError, month_restore


def _month(value: str) -> date:
    try:
        return datetime.strptime(value, "%Y-%m").date()
    except ValueError as error:
        raise CommandError(f"--month wants YYYY-MM, not {value!r}") from error


class Command(BaseCommand):
    help = "Restore an archived month of history (or one person's part of it) for support."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--month", required=True, type=_month, help="YYYY-MM (UTC)")
        parser.add_argument("--user-id", help="Only this person's rows (product user id).")

    def handle(self, *args, month: date, user_id: str | None, **options) -> None:
        try:
            report = month_restore(month=month, user_id=user_id)
        except RestoreError as error:
            raise CommandError(str(error)) from error
        for table, inserted in report.inserted.items():
            in_archive = report.in_archive[table]
            self.stdout.write(f"{table}: {inserted} restored of {in_archive} in the archive")
        self.stdout.write(
            f"{month:%Y-%m} restored; retention drops it again after NOTIFY_RESTORE_KEEP_DAYS"
        )
