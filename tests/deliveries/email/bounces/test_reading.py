"""Reading returned mail: which kind it is and which message it is about."""

from __future__ import annotations

import pytest

from deliveries.bounces.reports import MailKind, mail_parse, mail_read
from deliveries.channels.verp import verp_address, verp_delivery
from tests.deliveries.email.bounces.mail import arf, dsn, out_of_office

VERP = "bounces+7.0123456789abcdef@bounce.example.com"


@pytest.mark.parametrize(
    ("raw", "kind"),
    [
        (dsn(to=VERP, rcpt="pat@example.com", message_id="<m@n>"), MailKind.HARD_BOUNCE),
        (
            dsn(to=VERP, rcpt="pat@example.com", message_id="<m@n>", action="delayed",
                status="4.2.2"),
            MailKind.SOFT_BOUNCE,
        ),
        (arf(to="fbl@bounce.example.com", rcpt="pat@example.com", message_id="<m@n>"),
         MailKind.COMPLAINT),
        (out_of_office(to=VERP, sender="pat@example.com"), MailKind.OTHER),
    ],
)  # fmt: skip
def test_each_kind_of_returned_mail_is_told_apart(raw, kind):
    reading = mail_read(mail_parse(raw))
    assert reading.kind is kind
    if kind is not MailKind.OTHER:
        assert reading.message_id == "<m@n>"


def test_a_hard_bounce_says_why(settings):
    reading = mail_read(mail_parse(dsn(to=VERP, rcpt="pat@example.com", message_id="<m@n>")))
    assert "5.1.1" in reading.detail


def test_a_verp_address_names_its_delivery_only_with_its_signature(settings):
    settings.NOTIFY_BOUNCE_DOMAIN = "bounce.example.com"
    address = verp_address(4242)
    assert verp_delivery(address) == 4242
    assert verp_delivery(f"<{address.upper().replace('BOUNCES', 'bounces')}>") is None
    assert verp_delivery(address.replace("4242.", "4243.")) is None  # another id, same sig
    assert verp_delivery(address.replace("@bounce.example.com", "@elsewhere.example")) is None
    assert verp_address(None) == ""  # a test email, never saved: the usual sender
    settings.NOTIFY_BOUNCE_DOMAIN = ""
    assert verp_address(4242) == ""
    assert verp_delivery(address) is None
