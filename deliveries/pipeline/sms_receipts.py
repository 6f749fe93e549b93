"""An SMSC's delivery receipt, applied through the one road for provider feedback
(`provider_event_apply`), as an email provider's events are. The channel reads the
receipt off the bind (deliveries/channels/sms/smpp/receipts.py) and calls this through
the applier the deliveries app sets when it loads."""

from __future__ import annotations

import logging

from deliveries.channels.sms.smpp.receipts import DELIVERED_STATES, FAILED_STATES, Receipt
from deliveries.models import Delivery, ProviderEventKind
from deliveries.pipeline.provider_events import (
    Applied,
    ProviderNews,
    message_id_carried,
    provider_event_apply,
)
from notify.models import Channel

logger = logging.getLogger(__name__)

# The provider name SMS receipts are recorded under.
SMPP_PROVIDER = "smpp"


def sms_receipt_apply(receipt: Receipt) -> int:
    """Record and apply a receipt; how many deliveries carry its message id (zero: none
    yet — the send may not be recorded — and the SMSC is asked to resend it later).

    The receipt's key is its message id and state: the SMSC's copies of one receipt are
    one event. An interim state changes nothing.
    """
    if receipt.state in DELIVERED_STATES:
        kind = ProviderEventKind.DELIVERED
    elif receipt.state in FAILED_STATES:
        kind = ProviderEventKind.FAILED
    else:
        return Delivery.objects.filter(message_id_carried(Channel.SMS, receipt.message_id)).count()
    news = ProviderNews(
        esp=SMPP_PROVIDER,
        key=f"{receipt.message_id}:{receipt.state}"[:128],
        kind=kind,
        message_id=receipt.message_id,
        detail=f"DLR {receipt.state}: {receipt.text}"[:2000],
        channel=Channel.SMS,
    )
    applied = provider_event_apply(news=news, wait_if_unknown=False)
    if applied is Applied.UNKNOWN_MESSAGE:
        return 0
    if applied is Applied.RECORDED:
        logger.info("SMS %s: receipt %s recorded", receipt.message_id, receipt.state)
    return 1
