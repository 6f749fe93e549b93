"""Delivery receipts (deliver_sm with esm_class "SMSC delivery receipt") → delivery status.

A receipt names the SMSC message id (the receipted_message_id TLV, or `id:` in the
receipt text) and a final state (the message_state TLV, or `stat:` in the text).
DELIVRD moves the delivery from `delivered` (the SMSC accepted it) to `reached` (the
SMSC handed it to the phone), as an email provider's `delivered` event does; UNDELIV,
REJECTD, EXPIRED and DELETED make a `delivered` or `reached` one `failed`, with the
receipt text in last_error. Each move writes its status webhook event
(`delivery.reached`, `delivery.failed`) in the same transaction. Interim states
(ENROUTE, ACCEPTD, UNKNOWN) change nothing.

A receipt changes a delivery only from the statuses it moves from, so a receipt the
SMSC sends again (it resends until we acknowledge) changes nothing and posts nothing.
A long SMS keeps every part's id and each part may report: the first part reported
delivered makes it `reached`, and a part reported failed later still fails it (the
person did not get the whole text), as a hard bounce after `reached` fails an email.
"""

from __future__ import annotations

import logging
import re
import time
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import DatabaseError, close_old_connections, transaction
from django.db.models import Q, QuerySet
from django.utils import timezone

from deliveries.channels.sms.smpp.codes import ESME_ROK, ESME_RX_T_APPN
from deliveries.channels.sms.smpp.encoding import decode
from deliveries.models import Delivery, DeliveryStatus, Reason
from deliveries.webhook_events import webhook_events_write

logger = logging.getLogger(__name__)

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


def receipt_apply(*, receipt: Receipt) -> int:
    """Apply a receipt to the SMS deliveries it is about; how many rows it matched.

    Zero means no delivery carries that message id (yet): the caller may look again.
    A receipt never reopens anything: DELIVRD moves only `delivered`, a failed state
    only `delivered` and `reached`.
    """
    rows = Delivery.objects.filter(channel="sms").filter(_carries_id(receipt.message_id))
    if receipt.state in DELIVERED_STATES:
        moved = _rows_move(rows, {DeliveryStatus.DELIVERED}, DeliveryStatus.REACHED)
    elif receipt.state in FAILED_STATES:
        moved = _rows_move(
            rows,
            {DeliveryStatus.DELIVERED, DeliveryStatus.REACHED},
            DeliveryStatus.FAILED,
            reason=Reason.REJECTED,
            last_error=f"DLR {receipt.state}: {receipt.text}"[:2000],
        )
    else:
        moved = 0
    if moved:
        logger.info("SMS %s: receipt %s → %s", receipt.message_id, receipt.state,
                    "reached" if receipt.state in DELIVERED_STATES else "failed")  # fmt: skip
        return moved
    return rows.count()


def _rows_move(rows: QuerySet[Delivery], from_statuses: set[str], to: str, **changes: str) -> int:
    """Move the rows still in one of `from_statuses` to `to` and write their status
    webhook events, in one transaction; how many moved.

    The rows are locked first: a receipt the SMSC resends while the first is being
    applied waits, then finds them moved and changes nothing (one event each).
    """
    with transaction.atomic():
        changed = list(
            rows.filter(status__in=from_statuses).select_for_update()
            .values_list("pk", "accepted_at")
        )  # fmt: skip
        if not changed:
            return 0
        Delivery.objects.filter(pk__in=[pk for pk, _ in changed]).update(
            status=to, updated_at=timezone.now(), **changes
        )
        # Reported by the SMSC, but with no time to pass on: a receipt's `done date` has
        # no time zone (the SMSC's own, which we do not know).
        webhook_events_write(deliveries=[(pk, month, to) for pk, month in changed], reported=True)
    return len(changed)


def _carries_id(message_id: str) -> Q:
    """A concatenated SMS keeps every part's id, space-separated; any part may report."""
    return (
        Q(provider_message_id=message_id)
        | Q(provider_message_id__startswith=f"{message_id} ")
        | Q(provider_message_id__endswith=f" {message_id}")
        | Q(provider_message_id__contains=f" {message_id} ")
    )


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
