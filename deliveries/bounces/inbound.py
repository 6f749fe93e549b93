"""A returned mail, applied: find its delivery (the VERP address it was sent to, else the
original Message-ID it quotes), translate it into provider news and hand it to
`provider_event_apply`, as an ESP's webhook events are; keep the mail whatever it was."""

from __future__ import annotations

import hashlib
import logging

from django.conf import settings
from django.db import transaction

from deliveries.bounce_models import BounceMail, BounceOutcome
from deliveries.bounces.reports import MailKind, mail_parse, mail_read
from deliveries.channels.verp import verp_delivery
from deliveries.models import Delivery, ProviderEventKind
from deliveries.pipeline.provider_events import Applied, ProviderNews, provider_event_apply
from notify.models import Channel

logger = logging.getLogger(__name__)

ESP = "smtp"  # the provider name our own relay's events are recorded under
# A kept mail's bytes, at most: the report and the original's headers are at its top.
KEPT_BYTES = 256 * 1024
_KINDS = {
    MailKind.HARD_BOUNCE: ProviderEventKind.BOUNCED,
    MailKind.SOFT_BOUNCE: ProviderEventKind.BOUNCED,
    MailKind.COMPLAINT: ProviderEventKind.COMPLAINED,
}


def bounce_mail_accept(*, raw: bytes, envelope_to: list[str], envelope_from: str) -> BounceMail:
    """Apply one mail the bounce domain received (`raw`, at most NOTIFY_BOUNCE_MAX_BYTES)
    and keep it; returns its record."""
    message = mail_parse(raw)
    reading = mail_read(message)
    delivery_id = next(filter(None, map(verp_delivery, envelope_to)), None)
    if delivery_id is None and reading.return_path:
        delivery_id = verp_delivery(reading.return_path)
    # A bounce counts only through its signed VERP address: anyone can mail the domain
    # a report quoting a Message-ID. A complaint may name its message by Message-ID, as
    # feedback loops quote the message rather than answer its envelope sender.
    message_id = _message_id_of(delivery_id)
    if not message_id and reading.kind is MailKind.COMPLAINT:
        message_id = reading.message_id
    kind = _KINDS.get(reading.kind)
    outcome = BounceOutcome.IGNORED
    with transaction.atomic():
        if kind is not None:
            outcome = BounceOutcome.UNMATCHED
            if message_id:
                news = ProviderNews(
                    esp=ESP,
                    # The same report delivered twice is one event: its bytes are its key.
                    key=f"{kind}:sha256:{hashlib.sha256(raw).hexdigest()}"[:128],
                    kind=kind,
                    message_id=message_id[:255],
                    hard=reading.kind is MailKind.HARD_BOUNCE,
                    detail=reading.detail[: settings.NOTIFY_PROVIDER_EVENT_DETAIL_CHARS],
                )
                applied = provider_event_apply(news=news, wait_if_unknown=False)
                outcome = {
                    Applied.RECORDED: BounceOutcome.APPLIED,
                    Applied.REPLAY: BounceOutcome.REPLAY,
                }.get(applied, BounceOutcome.UNMATCHED)
        record = BounceMail.objects.create(
            envelope_to=", ".join(envelope_to)[:320],
            envelope_from=envelope_from[:320],
            subject=str(message.get("Subject", ""))[:255],
            kind=reading.kind.value,
            outcome=outcome,
            delivery_id=delivery_id,
            message_id=message_id[:255],
            detail=reading.detail[:500],
            raw=raw[:KEPT_BYTES],
        )
    logger.info("bounce mail %s: %s, %s", record.pk, reading.kind.value, outcome)
    return record


def _message_id_of(delivery_id: int | None) -> str:
    """The Message-ID our relay gave the email of `delivery_id` ("" if none)."""
    if delivery_id is None:
        return ""
    found = (
        Delivery.objects.filter(pk=delivery_id, channel=Channel.EMAIL)
        .values_list("provider_message_id", flat=True)
        .first()
    )
    return found or ""
