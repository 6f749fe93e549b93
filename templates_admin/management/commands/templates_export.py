"""`manage.py templates_export --locale ru [--out FILE] [--category KEY ...]`: a locale's
template texts as a PO file for a translator (see `templates_admin.translation_files`)."""

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError, CommandParser

from templates_admin.models import Template
from templates_admin.translation_files import translations_export
from templates_admin.translations import is_default_locale


class Command(BaseCommand):
    help = (
        "Write a PO file: the default locale's published texts as msgid, the locale's newest "
        "texts as msgstr, msgctxt <category>/<channel>/<field>."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--locale", required=True, help="The translation's locale, e.g. ru.")
        parser.add_argument("--out", default="-", help="The file to write; - (default) = stdout.")
        parser.add_argument(
            "--category",
            action="append",
            default=[],
            help="Only this category's templates (repeatable); omitted = every category.",
        )

    def handle(self, *args, locale: str, out: str, category: list[str], **options) -> None:
        if is_default_locale(locale):
            raise CommandError(f"{locale} is the default locale: its texts are the sources.")
        templates = Template.objects.filter(category__key__in=category) if category else None
        content = translations_export(locale=locale, templates=templates)
        if out == "-":
            self.stdout.write(content.decode("utf-8"), ending="")
        else:
            Path(out).write_bytes(content)
            self.stderr.write(f"Wrote {out}.")
