"""`manage.py history_retention [--status]`: the retention run beat schedules, here and now
and without Celery (a first run over a long history can take hours): months past
NOTIFY_RETENTION_DAYS are archived, verified and dropped (docs/history.md)."""

from __future__ import annotations

from django.core.management.base import BaseCommand

from history.retention import retention_run, retention_status


class Command(BaseCommand):
    help = "Archive, verify and drop the months of history past retention."

    def add_arguments(self, parser) -> None:
        parser.add_argument(
            "--status", action="store_true", help="Only print what is pending; change nothing."
        )

    def handle(self, *args, status: bool, **options) -> None:
        if status:
            for name, value in vars(retention_status()).items():
                self.stdout.write(f"{name}: {value}")
            return
        report = retention_run()
        if report.busy:
            self.stdout.write("another retention run is going; nothing done")
            return
        for month, rows in report.archived.items():
            counts = ", ".join(f"{table} {n}" for table, n in rows.items())
            self.stdout.write(f"{month}: archived and dropped ({counts})")
        for month in report.released:
            self.stdout.write(f"{month}: restored copy dropped")
        for month, error in report.failed.items():
            self.stderr.write(f"{month}: FAILED, left in the database: {error}")
        self.stdout.write(
            f"erased people's rows removed from the archive: {report.archive_rows_erased}"
        )
        if not (report.archived or report.released or report.failed):
            self.stdout.write("no month is past retention")
