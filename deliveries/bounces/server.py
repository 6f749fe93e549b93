"""The `bounces` process: an SMTP (or LMTP) server for the bounce domain, which the MTA
that receives the domain's mail hands every returned mail to.

It accepts mail only for NOTIFY_BOUNCE_DOMAIN (never a relay), at most
NOTIFY_BOUNCE_MAX_BYTES a mail, and answers 250 only once the mail is applied and kept:
if the database is away it answers 451, so the MTA keeps the mail and tries again, and
nothing is lost.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from aiosmtpd.controller import Controller
from aiosmtpd.lmtp import LMTP
from django.conf import settings
from django.db import close_old_connections

from deliveries.bounces.inbound import bounce_mail_accept
from deliveries.channels.verp import at_bounce_domain

logger = logging.getLogger(__name__)


class BounceHandler:
    """aiosmtpd's handler: refuse other domains' recipients; apply each mail in a thread
    (the ORM is synchronous) before answering for it."""

    async def handle_RCPT(self, server, session, envelope, address: str, rcpt_options) -> str:
        if not at_bounce_domain(address):
            return "550 5.7.1 not a bounce address of this domain"
        envelope.rcpt_tos.append(address)
        return "250 OK"

    async def handle_DATA(self, server, session, envelope) -> str:
        raw = envelope.original_content or envelope.content
        if isinstance(raw, str):
            raw = raw.encode("utf-8", "surrogateescape")
        loop = asyncio.get_running_loop()
        try:
            await loop.run_in_executor(
                None, _accept, raw, list(envelope.rcpt_tos), envelope.mail_from or ""
            )
        except Exception:  # the database away: the MTA keeps the mail and tries again
            logger.exception("bounce mail to %s could not be applied", envelope.rcpt_tos)
            return "451 4.3.0 could not be recorded now; try again later"
        return "250 OK"


def _accept(raw: bytes, envelope_to: list[str], envelope_from: str) -> None:
    close_old_connections()
    try:
        bounce_mail_accept(raw=raw, envelope_to=envelope_to, envelope_from=envelope_from)
    finally:
        close_old_connections()


class _LmtpController(Controller):
    def factory(self) -> Any:
        return LMTP(self.handler, **self.SMTP_kwargs)


def bounce_server(*, host: str, port: int, lmtp: bool) -> Controller:
    """The bounce server, started (in a thread of its own); stop it with `.stop()`."""
    kind = _LmtpController if lmtp else Controller
    controller = kind(
        BounceHandler(),
        hostname=host,
        port=port,
        data_size_limit=settings.NOTIFY_BOUNCE_MAX_BYTES,
        server_hostname=settings.NOTIFY_BOUNCE_DOMAIN or None,
    )
    controller.start()
    return controller
