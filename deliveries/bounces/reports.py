"""What a mail that came back to the bounce domain is: a permanent or temporary bounce, a
spam complaint, or neither (an out-of-office reply, a person answering the sender).

Bounces come in many formats besides RFC 3464's delivery status notification (each MTA
had its own before it, and some still do), so they are read with flufl.bounce, whose
detectors know them and report which addresses failed for good and which only for now.
A complaint is an RFC 5965 ARF report (`multipart/report; report-type=feedback-report`)
from a mailbox provider's feedback loop; the message it is about travels inside it, and
its Message-ID (and its envelope sender, our VERP address, when the provider keeps it)
says which delivery it was.
"""

from __future__ import annotations

import email
import email.policy
import logging
from dataclasses import dataclass
from email.message import Message
from enum import Enum

from flufl.bounce import all_failures

# flufl.bounce logs each of its two dozen detectors at INFO for every mail.
logging.getLogger("flufl.bounce").setLevel(logging.WARNING)


class MailKind(Enum):
    HARD_BOUNCE = "hard_bounce"
    SOFT_BOUNCE = "soft_bounce"
    COMPLAINT = "complaint"
    OTHER = "other"  # not a bounce nor a complaint: kept, changes nothing


@dataclass(frozen=True)
class MailReading:
    """What a returned mail says: its kind, the original message's Message-ID and
    envelope sender when it carries them, and a short detail for the record."""

    kind: MailKind
    message_id: str = ""
    return_path: str = ""
    detail: str = ""


def mail_parse(raw: bytes) -> Message:
    """The mail as a message object (the compat32 policy flufl.bounce expects)."""
    return email.message_from_bytes(raw)


def mail_read(message: Message) -> MailReading:
    """Classify a returned mail and find the message it is about."""
    original = _original_headers(message)
    message_id = (original.get("Message-ID") or "").strip() if original else ""
    return_path = (original.get("Return-Path") or "").strip() if original else ""
    if _is_feedback_report(message):
        feedback = _feedback_fields(message)
        return MailReading(
            MailKind.COMPLAINT,
            message_id,
            return_path,
            f"feedback-type {feedback.get('Feedback-Type', '?').strip()}",
        )
    temporary, permanent = all_failures(message)
    if permanent:
        return MailReading(MailKind.HARD_BOUNCE, message_id, return_path, _status(message))
    if temporary:
        return MailReading(MailKind.SOFT_BOUNCE, message_id, return_path, _status(message))
    return MailReading(MailKind.OTHER, message_id, return_path, "not a bounce or a complaint")


def _is_feedback_report(message: Message) -> bool:
    return (
        message.get_content_type() == "multipart/report"
        and (message.get_param("report-type") or "").lower() == "feedback-report"
    )


def _feedback_fields(message: Message) -> Message:
    """The machine-readable part of an ARF report (its fields, as headers)."""
    for part in message.walk():
        if part.get_content_type() == "message/feedback-report":
            payload = part.get_payload()
            if isinstance(payload, list) and payload:  # parsed as a message's headers
                return payload[0]
            return email.message_from_string(str(payload))
    return Message()


def _original_headers(message: Message) -> Message | None:
    """The headers of the message a report is about: its `message/rfc822` or
    `text/rfc822-headers` part (RFC 3464 and RFC 5965 both carry one)."""
    for part in message.walk():
        kind = part.get_content_type()
        if kind == "message/rfc822":
            payload = part.get_payload()
            if isinstance(payload, list) and payload:
                return payload[0]
        if kind == "text/rfc822-headers":
            text = part.get_payload(decode=True).decode("utf-8", "replace")
            return email.message_from_string(text)
    return None


def _status(message: Message) -> str:
    """The DSN's Status and Diagnostic-Code of the first recipient, when there is one."""
    for part in message.walk():
        if part.get_content_type() != "message/delivery-status":
            continue
        for block in part.get_payload() or []:
            if not isinstance(block, Message):
                continue
            status = block.get("Status")
            if status:
                diagnostic = block.get("Diagnostic-Code", "")
                return f"status {status.strip()} {diagnostic.strip()}".strip()
    return ""
