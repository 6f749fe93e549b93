"""`manage.py erase_user USER_ID [USER_ID ...] --by WHO`: erase people on request (as
`DELETE /v1/users/{user_id}` does); each request is recorded in the erasure ledger.

`manage.py erase_user --reapply-ledger --by WHO` erases again every recipient the ledger
names that exists: after a database backup was restored in place (docs/erasure.md)."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from campaigns.erasure import ledger_reapply, person_erase
from notify.models import ErasureVia


class Command(BaseCommand):
    help = "Erase people by product user id: personal data everywhere; consent kept hashed."

    def add_arguments(self, parser) -> None:
        parser.add_argument("user_ids", nargs="*", metavar="USER_ID")
        parser.add_argument(
            "--by", required=True, help="Who asked for it (a name or ticket), for the ledger."
        )
        parser.add_argument(
            "--reapply-ledger",
            action="store_true",
            help="Erase again every recipient the ledger names (after a restore).",
        )

    def handle(self, *args, user_ids: list[str], by: str, reapply_ledger: bool, **options):
        if not user_ids and not reapply_ledger:
            raise CommandError("Name at least one USER_ID, or give --reapply-ledger.")
        requested_by = f"command: {by}"
        for user_id in user_ids:
            erased = person_erase(
                user_id=user_id, via=ErasureVia.COMMAND, requested_by=requested_by
            )
            state = "erased" if erased.found else "no recipient (recorded)"
            self.stdout.write(f"ledger {erased.erasure.pk}: {state}")
        if reapply_ledger:
            count = ledger_reapply(requested_by=requested_by)
            self.stdout.write(f"ledger re-applied: {count} restored recipients erased again")
