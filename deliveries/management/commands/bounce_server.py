"""`manage.py bounce_server`: the process the bounce domain's MTA hands returned mail to."""

import time

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from deliveries.bounces.server import bounce_server
from notify.checks import process_exit_on_weak_secret_key
from notify.relay import stop_on_signals


class Command(BaseCommand):
    help = "Receive bounces and complaints for NOTIFY_BOUNCE_DOMAIN over SMTP or LMTP."

    def handle(self, *args, **options) -> None:
        process_exit_on_weak_secret_key(process="bounce_server")
        should_stop = stop_on_signals()
        if not settings.NOTIFY_BOUNCE_DOMAIN:
            # Idle, not an error: a process manager running the whole Procfile (honcho)
            # stops every process when one exits.
            self.stderr.write(
                "bounce server: NOTIFY_BOUNCE_DOMAIN is not set, so no email names a "
                "bounce address; nothing to receive (docs/email-providers.md)"
            )
            while not should_stop():
                time.sleep(0.5)
            return
        host, _, port = settings.NOTIFY_BOUNCE_LISTEN.rpartition(":")
        if not host or not port.isdigit():
            raise CommandError("NOTIFY_BOUNCE_LISTEN must be host:port")
        server = bounce_server(host=host, port=int(port), lmtp=settings.NOTIFY_BOUNCE_LMTP)
        protocol = "LMTP" if settings.NOTIFY_BOUNCE_LMTP else "SMTP"
        self.stdout.write(f"bounce server: {protocol} on {host}:{port}", ending="\n")
        self.stdout.flush()
        try:
            while not should_stop():
                time.sleep(0.2)
        finally:
            server.stop()
            self.stdout.write("bounce server: stopped", ending="\n")
