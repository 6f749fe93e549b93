"""`manage.py create_producer NAME [--categories a,b] [--scopes a,b] [--events-per-minute N]
[--events-per-day N] [--campaign-events-per-day N]`: a new API key, printed once."""

from django.core.management.base import BaseCommand, CommandError, CommandParser

from notify.api_keys import PRODUCER_QUOTA_FIELDS, api_key_issue
from notify.models import DEFAULT_SCOPES, Scope


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
            help=f"Comma-separated scopes ({', '.join(Scope.values)}); omitted = "
            f"{', '.join(DEFAULT_SCOPES)} only (send, and read its own producer's notifications).",
        )
        for field in PRODUCER_QUOTA_FIELDS:
            parser.add_argument(
                f"--{field.replace('_', '-')}",
                type=int,
                default=None,
                help=f"The producer's quota: {field.replace('_', ' ')} (shared by all its "
                "keys); omitted = unchanged (a new producer: the settings' default).",
            )

    def handle(self, *args, name: str, categories: str, scopes: str, **options) -> None:
        quotas = {
            field: options[field] for field in PRODUCER_QUOTA_FIELDS if options[field] is not None
        }
        if any(value < 0 for value in quotas.values()):
            raise CommandError("A quota is a whole number of events, 0 or more.")
        keys = [key.strip() for key in categories.split(",") if key.strip()]
        scope_list = [scope.strip() for scope in scopes.split(",") if scope.strip()]
        try:
            issued = api_key_issue(
                producer_name=name,
                category_keys=keys or None,
                scopes=scope_list or None,
                quotas=quotas,
            )
        except ValueError as error:
            raise CommandError(str(error)) from None
        reach = ", ".join(keys) if keys else "all categories"
        may = ", ".join(issued.api_key.scopes)
        self.stdout.write(
            f"Producer {name!r}: new API key for {reach} ({may}). It is shown only once:"
        )
        self.stdout.write(issued.key)
