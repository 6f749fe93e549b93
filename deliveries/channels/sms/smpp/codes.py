"""SMPP command_status → outcome: the one table every SMPP answer goes through.

Kinds: `ok`; `throttled` (0x58, paused and retried inside the send); `transient`
(the SMSC, the bind or our account setup — retried later); `permanent` (this message or
this number can never go — failed, not retried). Source-address and login problems are
transient like SMTP sender/login refusals in email.py: they are about our side, and
every message would fail alike until an operator fixes the setup.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from deliveries.channels.base import SendResult


class StatusKind(Enum):
    OK = "ok"
    THROTTLED = "throttled"
    TRANSIENT = "transient"
    PERMANENT = "permanent"


@dataclass(frozen=True)
class StatusInfo:
    kind: StatusKind
    name: str
    text: str


OK, THR, TRN, PRM = StatusKind.OK, StatusKind.THROTTLED, StatusKind.TRANSIENT, StatusKind.PERMANENT

ESME_ROK = 0x00000000
ESME_RTHROTTLED = 0x00000058
# Our answer to a deliver_sm we cannot place yet: the SMSC keeps it and sends it again.
ESME_RX_T_APPN = 0x00000064

STATUS_TABLE: dict[int, StatusInfo] = {
    0x00: StatusInfo(OK, "ESME_ROK", "accepted"),
    0x01: StatusInfo(PRM, "ESME_RINVMSGLEN", "message length is invalid"),
    0x02: StatusInfo(PRM, "ESME_RINVCMDLEN", "command length is invalid"),
    0x03: StatusInfo(PRM, "ESME_RINVCMDID", "invalid command id"),
    0x04: StatusInfo(TRN, "ESME_RINVBNDSTS", "incorrect bind status for this command"),
    0x05: StatusInfo(TRN, "ESME_RALYBND", "already bound"),
    0x06: StatusInfo(PRM, "ESME_RINVPRTFLG", "invalid priority flag"),
    0x07: StatusInfo(PRM, "ESME_RINVREGDLVFLG", "invalid registered delivery flag"),
    0x08: StatusInfo(TRN, "ESME_RSYSERR", "SMSC system error"),
    0x0A: StatusInfo(TRN, "ESME_RINVSRCADR", "invalid source address (our sender id)"),
    0x0B: StatusInfo(PRM, "ESME_RINVDSTADR", "invalid destination address"),
    0x0C: StatusInfo(PRM, "ESME_RINVMSGID", "message id is invalid"),
    0x0D: StatusInfo(TRN, "ESME_RBINDFAIL", "bind failed"),
    0x0E: StatusInfo(TRN, "ESME_RINVPASWD", "invalid password"),
    0x0F: StatusInfo(TRN, "ESME_RINVSYSID", "invalid system id"),
    0x14: StatusInfo(TRN, "ESME_RMSGQFUL", "SMSC message queue full"),
    0x15: StatusInfo(PRM, "ESME_RINVSERTYP", "invalid service type"),
    0x33: StatusInfo(PRM, "ESME_RINVNUMDESTS", "invalid number of destinations"),
    0x34: StatusInfo(PRM, "ESME_RINVDLNAME", "invalid distribution list name"),
    0x40: StatusInfo(PRM, "ESME_RINVDESTFLAG", "invalid destination flag"),
    0x42: StatusInfo(PRM, "ESME_RINVSUBREP", "invalid submit with replace request"),
    0x43: StatusInfo(PRM, "ESME_RINVESMCLASS", "invalid esm_class"),
    0x44: StatusInfo(PRM, "ESME_RCNTSUBDL", "cannot submit to distribution list"),
    0x45: StatusInfo(TRN, "ESME_RSUBMITFAIL", "submit_sm failed"),
    0x48: StatusInfo(TRN, "ESME_RINVSRCTON", "invalid source address TON (our sender id)"),
    0x49: StatusInfo(TRN, "ESME_RINVSRCNPI", "invalid source address NPI (our sender id)"),
    0x50: StatusInfo(PRM, "ESME_RINVDSTTON", "invalid destination address TON"),
    0x51: StatusInfo(PRM, "ESME_RINVDSTNPI", "invalid destination address NPI"),
    0x53: StatusInfo(TRN, "ESME_RINVSYSTYP", "invalid system type"),
    0x54: StatusInfo(PRM, "ESME_RINVREPFLAG", "invalid replace_if_present flag"),
    0x55: StatusInfo(PRM, "ESME_RINVNUMMSGS", "invalid number of messages"),
    0x58: StatusInfo(THR, "ESME_RTHROTTLED", "throttling error: over the account's rate"),
    0x61: StatusInfo(PRM, "ESME_RINVSCHED", "invalid scheduled delivery time"),
    0x62: StatusInfo(PRM, "ESME_RINVEXPIRY", "invalid validity period"),
    0x63: StatusInfo(PRM, "ESME_RINVDFTMSGID", "predefined message not found"),
    0x64: StatusInfo(TRN, "ESME_RX_T_APPN", "temporary application error at the receiver"),
    0x65: StatusInfo(PRM, "ESME_RX_P_APPN", "permanent application error at the receiver"),
    0x66: StatusInfo(PRM, "ESME_RX_R_APPN", "rejected by the receiver (blocked number)"),
    0x67: StatusInfo(TRN, "ESME_RQUERYFAIL", "query_sm failed"),
    0xC0: StatusInfo(PRM, "ESME_RINVOPTPARSTREAM", "error in the optional parameters"),
    0xC1: StatusInfo(PRM, "ESME_ROPTPARNOTALLWD", "optional parameter not allowed"),
    0xC2: StatusInfo(PRM, "ESME_RINVPARLEN", "invalid parameter length"),
    0xC3: StatusInfo(PRM, "ESME_RMISSINGOPTPARAM", "expected optional parameter missing"),
    0xC4: StatusInfo(PRM, "ESME_RINVOPTPARAMVAL", "invalid optional parameter value"),
    0xFE: StatusInfo(TRN, "ESME_RDELIVERYFAILURE", "delivery failure"),
    0xFF: StatusInfo(TRN, "ESME_RUNKNOWNERR", "unknown error"),
}

# Refusals that say the number itself can never be reached (invalid destination address;
# the receiver rejects it, a blocked or barred number): the address is suppressed.
HARD_BOUNCE_STATUSES = frozenset({0x0B, 0x66})
# Codes outside the table (reserved or vendor-specific 0x400-0x4FF): we cannot know they
# are final, so they are retried — bounded by the channel's retry schedule.
UNKNOWN = StatusInfo(TRN, "unknown", "status not in the SMPP 3.4 table")


def classify_status(status: int) -> StatusInfo:
    """What an SMSC answer means for the message."""
    return STATUS_TABLE.get(status, UNKNOWN)


def status_code(status: int) -> str:
    """The form kept on the attempt row: `0x0000000B`."""
    return f"0x{status:08X}"


def refused(status: int) -> SendResult:
    """An SMSC's refusal (neither OK nor throttling) as a result: permanent or transient
    by the table, a hard bounce when the number itself can never be reached."""
    info = classify_status(status)
    code, text = status_code(status), f"{info.name}: {info.text}"
    if info.kind is StatusKind.PERMANENT:
        bounce = status in HARD_BOUNCE_STATUSES
        return SendResult.permanent(status_code=code, response=text, hard_bounce=bounce)
    return SendResult.transient(status_code=code, response=text)
