"""PIPELINING (RFC 2920) on the SMTP session: with a relay that offers it, an email's MAIL,
RCPT and DATA go in one write; every answer a relay can give ends the same way as on a
relay that does not offer it (smtplib's own path), and the session goes on afterwards."""

from __future__ import annotations

import smtplib

import pytest

from deliveries.channels.smtp import _WatchedSmtp

BODY = (
    b"Subject: hello\r\nFrom: notify@localhost\r\nTo: a@example.com\r\n\r\n"
    b"first line\r\n.a line that starts with a dot\r\n..two dots\r\nlast line\r\n"
)


class CountedWrites(_WatchedSmtp):
    """The product's session class, counting its writes to the relay."""

    writes = 0

    def send(self, s):
        self.writes += 1
        return super().send(s)


@pytest.fixture(params=[True, False], ids=["relay-pipelines", "relay-does-not"])
def relay(request, smtp):
    smtp.handler.pipelining = request.param
    return smtp


def session(relay) -> CountedWrites:
    opened = CountedWrites("127.0.0.1", relay.port, timeout=10)
    opened.ehlo()
    opened.writes = 0
    return opened


def test_the_relay_offers_pipelining_only_when_told(relay):
    with session(relay) as smtp:
        assert smtp.has_extn("pipelining") == relay.handler.pipelining


def test_an_email_is_received_whole_and_costs_two_writes_when_pipelined(relay):
    with session(relay) as smtp:
        assert smtp.sendmail("notify@localhost", ["a@example.com"], BODY) == {}
        writes = smtp.writes
    [mail] = relay.received
    assert mail.mail_from == "notify@localhost"
    assert mail.rcpt_tos == ["a@example.com"]
    assert mail.message.get_payload() == (
        "first line\r\n.a line that starts with a dot\r\n..two dots\r\nlast line\r\n"
    )
    # Pipelined: the three commands, then the body. smtplib: MAIL, RCPT, DATA, body.
    assert writes == (2 if relay.handler.pipelining else 4)


ANSWERS = [
    ("mail", "550 5.7.1 Sender not allowed", smtplib.SMTPSenderRefused, 550),
    ("mail", "451 4.3.0 Try again later", smtplib.SMTPSenderRefused, 451),
    ("rcpt", "550 5.1.1 No such user here", smtplib.SMTPRecipientsRefused, 550),
    ("rcpt", "450 4.2.1 Mailbox busy", smtplib.SMTPRecipientsRefused, 450),
    ("data", "554 5.7.1 Rejected as spam", smtplib.SMTPDataError, 554),
    ("data", "451 4.3.0 Try again later", smtplib.SMTPDataError, 451),
]


@pytest.mark.parametrize(("command", "answer", "error", "code"), ANSWERS)
def test_a_refusal_raises_what_smtplib_raises_and_the_session_goes_on(
    relay, command, answer, error, code
):
    getattr(relay.handler, f"{command}_answers").append(answer)
    with session(relay) as smtp:
        with pytest.raises(error) as raised:
            smtp.sendmail("notify@localhost", ["refused@example.com"], BODY)
        # The next email on the same session is a fresh transaction, and it arrives.
        smtp.sendmail("notify@localhost", ["next@example.com"], BODY)
    if error is smtplib.SMTPRecipientsRefused:
        assert raised.value.recipients["refused@example.com"][0] == code
    else:
        assert raised.value.smtp_code == code
    assert [mail.rcpt_tos for mail in relay.received] == [["next@example.com"]]


def test_a_newline_in_a_command_is_refused_before_anything_is_written(relay):
    with session(relay) as smtp:
        with pytest.raises(ValueError):
            smtp.sendmail("notify@localhost", ["a@example.com"], BODY, ["BODY=8BITMIME\r\nRSET"])
        assert smtp.writes == 0
    assert relay.received == []
