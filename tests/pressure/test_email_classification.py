"""Classification for email: every row of the SMTP answer table, one case each."""

from __future__ import annotations

import smtplib

import pytest

from deliveries.channels.email import classify_smtp_error
from deliveries.models import AttemptOutcome

T, P = AttemptOutcome.TRANSIENT, AttemptOutcome.PERMANENT


@pytest.mark.parametrize(
    ("error", "outcome", "code"),
    [
        (smtplib.SMTPRecipientsRefused({"a@x": (550, b"5.1.1 no such user")}), P, "550"),
        (smtplib.SMTPRecipientsRefused({"a@x": (553, b"mailbox name not allowed")}), P, "553"),
        (smtplib.SMTPRecipientsRefused({"a@x": (450, b"mailbox busy")}), T, "450"),
        (smtplib.SMTPRecipientsRefused({"a@x": (452, b"too many recipients")}), T, "452"),
        (smtplib.SMTPDataError(554, b"5.7.1 message rejected as spam"), P, "554"),
        (smtplib.SMTPDataError(451, b"4.3.0 try again later"), T, "451"),
        (smtplib.SMTPSenderRefused(550, b"sender not allowed", "notify@x"), T, "550"),
        (smtplib.SMTPAuthenticationError(535, b"bad credentials"), T, "535"),
        (
            smtplib.SMTPServerDisconnected("Connection unexpectedly closed"),
            T,
            "SMTPServerDisconnected",
        ),
        (smtplib.SMTPConnectError(421, b"service not available"), T, "421"),
        (ConnectionRefusedError(111, "Connection refused"), T, "ConnectionRefusedError"),
        (TimeoutError("timed out"), T, "TimeoutError"),
    ],
)
def test_each_smtp_answer_is_classified(error, outcome, code):
    result = classify_smtp_error(error)
    assert result.outcome == outcome
    assert result.status_code == code
    assert result.response  # the provider's words are kept for support
