"""`manage.py create_producer NAME [--categories a,b] [--scopes a,b]`: a new API key,
printed once."""

from django.core.management.base import BaseCommand, CommandError, CommandParser

from notify.models import Scope
from notify.services import api_key_issue


class Command(BaseCommand):
    help = (
        "Create a producer (if new) and a new API key; the key is printed alone on the last line."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("name")
        parser.add_argument(
            "--categories",
            default="",
            help="Comma-separated category keys this key may send; omitted = all categories.",
        )
        parser.add_argument(
            "--scopes",
            default="",
            help=f"Comma-separated scopes ({', '.join(Scope.values)}); omitted = all scopes.",
        )

    def handle(self, *args, name: str, categories: str, scopes: str, **options) -> None:
        keys = [key.strip() for key in categories.split(",") if key.strip()]
        scope_list = [scope.strip() for scope in scopes.split(",") if scope.strip()]
        try:
            issued = api_key_issue(
                producer_name=name, category_keys=keys or None, scopes=scope_list or None
            )
        except ValueError as error:
            raise CommandError(str(error)) from None
        reach = ", ".join(keys) if keys else "all categories"
        may = ", ".join(issued.api_key.scopes) or "all scopes"
        self.stdout.write(
            f"Producer {name!r}: new API key for {reach} ({may}). It is shown only once:"
        )
        self.stdout.write(issued.key)
