"""The recipient's address as the SMTP session writes it: Django's sanitized form, also
when a plain address skips the parser; and the envelope's MAIL FROM and RCPT TO as
smtplib writes them, also when a plain address skips smtplib's parser."""

from __future__ import annotations

import smtplib

import pytest
from django.core.mail.message import sanitize_address

from deliveries.channels.smtp import _WatchedSmtp, _WatchedSmtpSsl, address_sanitized

ADDRESSES = [
    "bench-c-0000001@bench.example",
    "A.B@Example.COM",
    "o'brien+tag@sub.domain.co.uk",
    "x_y{z}~1@a-b.io",
    "a..b@x.com",
    "José@x.com",
    "a@exämple.com",
    "Name <a@x.com>",
    '"a b"@x.com',
    "a@" + "b" * 63 + ".com",
]


@pytest.mark.parametrize("address", ADDRESSES)
def test_an_address_is_written_as_django_sanitizes_it(address):
    assert address_sanitized(address, "utf-8") == sanitize_address(address, "utf-8")


@pytest.mark.parametrize("address", ["a@x.com.", "a@" + "b" * 64 + ".com", "a@"])
def test_an_address_django_refuses_is_refused(address):
    with pytest.raises(ValueError):
        sanitize_address(address, "utf-8")
    with pytest.raises(ValueError):
        address_sanitized(address, "utf-8")


def commands(session_class: type[smtplib.SMTP], *, esmtp: bool, sender: str, to: str) -> list:
    """The MAIL and RCPT commands a session of this class writes (no connection made)."""
    session = session_class.__new__(session_class)
    session.does_esmtp, session.esmtp_features, session.command_encoding = esmtp, {}, "ascii"
    written: list = []
    session.putcmd = lambda cmd, args="": written.append((cmd, args))
    session.getreply = lambda: (250, b"ok")
    session.mail(sender, ["size=1234", "BODY=8BITMIME"])
    session.mail(sender)
    session.rcpt(to)
    session.rcpt(to, ["NOTIFY=NEVER"])
    return written


@pytest.mark.parametrize("address", [a for a in ADDRESSES if "@" in a])
@pytest.mark.parametrize("esmtp", [True, False])
@pytest.mark.parametrize("session_class", [_WatchedSmtp, _WatchedSmtpSsl])
def test_the_envelope_is_written_as_smtplib_writes_it(address, esmtp, session_class):
    for sender in ("Notify <notify@localhost>", "notify@localhost", address):
        ours = commands(session_class, esmtp=esmtp, sender=sender, to=address)
        assert ours == commands(smtplib.SMTP, esmtp=esmtp, sender=sender, to=address)
