"""Delivery receipts (deliver_sm with esm_class "SMSC delivery receipt"), read here and
applied through the pipeline's one road for provider feedback
(deliveries/pipeline/provider_events.py, as an email provider's events are).

A receipt names the SMSC message id (the receipted_message_id TLV, or `id:` in the
receipt text) and a final state (the message_state TLV, or `stat:` in the text).
DELIVRD moves the delivery from `delivered` (the SMSC accepted it) to `reached` (the
SMSC handed it to the phone), as an email provider's `delivered` event does; UNDELIV,
REJECTD, EXPIRED and DELETED make a `delivered` or `reached` one `failed`, with the
receipt text in last_error. Each move is announced (status webhooks post
`delivery.reached`, `delivery.failed`) in the same transaction. Interim states
(ENROUTE, ACCEPTD, UNKNOWN) change nothing.

Each receipt is recorded once, as a provider event keyed by its message id and state,
so a receipt the SMSC sends again (it resends until we acknowledge) changes nothing and
posts nothing; and a receipt changes a delivery only from the statuses it moves from.
A long SMS keeps every part's id and each part may report: the first part reported
delivered makes it `reached`, and a part reported failed later still fails it (the
person did not get the whole text), as a hard bounce after `reached` fails an email.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import DatabaseError, close_old_connections

from deliveries.channels.sms.smpp.codes import ESME_ROK, ESME_RX_T_APPN
from deliveries.channels.sms.smpp.encoding import decode

logger = logging.getLogger(__name__)

_applier: Callable[[Receipt], int] | None = None

ESM_CLASS_RECEIPT = 0x04  # bits 2-5: SMSC delivery receipt
# message_state TLV values (SMPP 3.4 §5.2.28) by the stat: words receipts use.
MESSAGE_STATES = {
    1: "ENROUTE", 2: "DELIVRD", 3: "EXPIRED", 4: "DELETED",
    5: "UNDELIV", 6: "ACCEPTD", 7: "UNKNOWN", 8: "REJECTD",
}  # fmt: skip
DELIVERED_STATES = frozenset({"DELIVRD"})
FAILED_STATES = frozenset({"UNDELIV", "REJECTD", "EXPIRED", "DELETED"})
_FIELD = re.compile(r"(\w+(?: date)?):(\S*)")


@dataclass(frozen=True)
class Receipt:
    message_id: str
    state: str  # DELIVRD, UNDELIV, …
    error: str
    text: str  # the receipt as the SMSC wrote it

    @property
    def final(self) -> bool:
        return self.state in DELIVERED_STATES or self.state in FAILED_STATES


def parse_receipt(pdu: Any) -> Receipt | None:
    """The receipt a deliver_sm carries, or None for a mobile-originated message."""
    if not (getattr(pdu, "esm_class", 0) or 0) & ESM_CLASS_RECEIPT:
        return None
    raw = getattr(pdu, "short_message", None) or getattr(pdu, "message_payload", None) or b""
    text = decode(raw, getattr(pdu, "data_coding", 0) or 0) if isinstance(raw, bytes) else raw
    fields = {name.lower(): value for name, value in _FIELD.findall(text)}
    message_id = _text(getattr(pdu, "receipted_message_id", None)) or fields.get("id", "")
    state_code = getattr(pdu, "message_state", None)
    state = MESSAGE_STATES.get(state_code, "") if state_code else ""
    state = state or fields.get("stat", "").upper()
    if not message_id:
        return None
    return Receipt(message_id, state, fields.get("err", ""), text.strip())


def receipt_applier_set(applier: Callable[[Receipt], int]) -> None:
    """Name the function that applies a final receipt to its delivery (the pipeline's
    provider-feedback road, set by the deliveries app when it loads): channels stand
    below the pipeline and do not import it."""
    global _applier
    _applier = applier


def receipt_apply(*, receipt: Receipt) -> int:
    """Apply a final receipt to the SMS delivery it is about; how many deliveries carry
    its message id (zero: none yet, and the caller may look again)."""
    if _applier is None:
        raise RuntimeError("no receipt applier set: the deliveries app has not loaded")
    return _applier(receipt)


def handle_deliver_sm(pdu: Any) -> int:
    """The session's receipt handler: the command_status to answer the deliver_sm with.

    The receipt can overtake the recording of the send it is about (the SMSC answers
    submit_sm and may report at once); it is looked up again a few times, then the SMSC
    is asked to resend it later (ESME_RX_T_APPN) rather than it being lost.
    """
    receipt = parse_receipt(pdu)
    if receipt is None:
        logger.info("SMS: deliver_sm that is not a delivery receipt; acknowledged")
        return ESME_ROK
    if not receipt.final:
        return ESME_ROK
    for look in range(settings.SMPP_DLR_MATCH_RETRIES + 1):
        if look:
            time.sleep(settings.SMPP_DLR_MATCH_DELAY)
        close_old_connections()  # this runs on the session's thread, outside any request
        try:
            if receipt_apply(receipt=receipt):
                return ESME_ROK
        except DatabaseError:
            logger.exception("SMS %s: receipt not applied; SMSC will resend", receipt.message_id)
            return ESME_RX_T_APPN
    logger.warning("SMS %s: receipt for an unknown message id; asking for a resend",
                   receipt.message_id)  # fmt: skip
    return ESME_RX_T_APPN


def _text(value: Any) -> str:
    if isinstance(value, bytes):
        return value.decode("ascii", "replace").strip("\x00")
    return str(value or "")
