"""`manage.py templates_import FILE [--locale ru]`: a translated PO file in as new drafts,
one per changed category and channel, never published (see
`templates_admin.translation_files`)."""

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError, CommandParser

from templates_admin.translation_files import (
    TranslationFileInvalid,
    translations_import,
)


class Command(BaseCommand):
    help = "Import a translated PO file as new draft versions (nothing is published)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("file", help="The PO file, as templates_export wrote it, translated.")
        parser.add_argument(
            "--locale", default=None, help="The locale; omitted = the file's Language header."
        )

    def handle(self, *args, file: str, locale: str | None, **options) -> None:
        try:
            report = translations_import(
                content=Path(file).read_bytes(), locale=locale, may_add=True
            )
        except (OSError, TranslationFileInvalid) as error:
            raise CommandError(str(error)) from error
        for version in report.created:
            self.stdout.write(f"draft {version}")
        for entry in report.skipped:
            self.stdout.write(f"ignored {entry}")
        for slot, problems in report.failed.items():
            self.stdout.write(f"NOT imported {slot}:")
            for problem in problems:
                self.stdout.write(f"  {problem}")
        self.stdout.write(
            f"{len(report.created)} draft(s) created in {report.locale}, "
            f"{len(report.failed)} refused, {report.unchanged} unchanged; nothing published."
        )
        if report.failed:
            raise CommandError(f"{len(report.failed)} draft(s) were not created (listed above).")
