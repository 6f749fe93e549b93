"""Bounces and complaints for email over SMTP, on real processes: a worker sends through
the SMTP peer with a VERP envelope sender, and the mailbox provider's answers are mailed
to the running `bounces` process (manage.py bounce_server) over SMTP, as the bounce
domain's MTA would hand them over."""

from __future__ import annotations

import smtplib

import pytest

from deliveries.models import (
    AddressSuppression,
    BounceMail,
    BounceOutcome,
    Delivery,
    DeliveryStatus,
    Reason,
)
from scripts.ports import unused_port
from tests.deliveries.email.bounces.mail import arf, dsn, out_of_office
from tests.deliveries.email.test_esp_e2e import PROMO, notify, settled
from tests.processes import ScriptProcess
from tests.waiting import wait_for

pytestmark = pytest.mark.e2e

DOMAIN = "bounce.example.com"


@pytest.fixture
def bounces(worker_env, pipeline, workers_with):
    """A worker that sends with VERP envelope senders, and the bounce server; returns
    a function that mails one returned message to the server."""
    verp = {"NOTIFY_BOUNCE_DOMAIN": DOMAIN}
    workers_with(**verp)
    port = unused_port()
    server = ScriptProcess(
        "manage.sh",
        "bounce_server",
        env={**worker_env, **verp, "NOTIFY_BOUNCE_LISTEN": f"127.0.0.1:{port}"},
        name="bounce-server",
        new_session=True,
    )
    server.start()
    server.wait_logged("bounce server: SMTP on")

    def mail(raw: bytes, *, to: str, sender: str = "") -> None:
        def sent() -> bool:
            assert server.running, f"the bounce server exited:\n{server.log()}"
            try:
                with smtplib.SMTP("127.0.0.1", port, timeout=10) as session:
                    session.sendmail(sender, [to], raw)
            except ConnectionRefusedError:  # not listening (yet, or any more): its log says
                return False
            return True

        wait_for(sent, timeout=10, what=f"the bounce server on {port} to take the mail")

    yield mail
    server.stop()


def sent_with(smtp, delivery: Delivery) -> str:
    """The envelope sender the SMTP peer saw for this delivery's email."""
    (received,) = [
        m for m in smtp.received if m.message["Message-ID"] == delivery.provider_message_id
    ]
    return received.mail_from


def test_a_hard_bounce_fails_the_email_and_suppresses_the_address(api, pat, bounces, pipeline):
    first = settled(notify(api), DeliveryStatus.DELIVERED)
    envelope = sent_with(pipeline, first)
    assert envelope.startswith(f"bounces+{first.pk}.") and envelope.endswith(f"@{DOMAIN}")
    report = dsn(to=envelope, rcpt="pat@example.com", message_id=first.provider_message_id)

    bounces(report, to=envelope)
    settled(first, DeliveryStatus.FAILED)
    assert first.reason == Reason.BOUNCED
    assert AddressSuppression.objects.filter(address="pat@example.com").exists()
    bounces(report, to=envelope)  # the MTA hands the same report over again: nothing more
    assert [m.outcome for m in BounceMail.objects.order_by("pk")] == [
        BounceOutcome.APPLIED,
        BounceOutcome.REPLAY,
    ]

    second = settled(notify(api), DeliveryStatus.SUPPRESSED)
    assert second.reason == Reason.ADDRESS_SUPPRESSED
    assert len(pipeline.received) == 1


def test_a_complaint_withdraws_marketing_and_not_login_codes(api, pat, bounces, pipeline):
    promo = settled(notify(api, "promo.weekly", PROMO), DeliveryStatus.DELIVERED)
    # Feedback loops mail their reports to the address registered for the domain, and
    # quote the message (its Message-ID) rather than answer its envelope sender.
    report = arf(to=f"fbl@{DOMAIN}", rcpt="pat@example.com", message_id=promo.provider_message_id)
    bounces(report, to=f"fbl@{DOMAIN}", sender="fbl@mailbox.example.org")
    wait_for(lambda: BounceMail.objects.filter(outcome=BounceOutcome.APPLIED).exists())

    assert settled(notify(api, "promo.weekly", PROMO), DeliveryStatus.SUPPRESSED).reason == (
        Reason.NO_CONSENT
    )
    code = notify(api, "security.login_code", {"code": "482913"})
    assert settled(code, DeliveryStatus.DELIVERED)


def test_an_out_of_office_reply_is_kept_and_changes_nothing(api, pat, bounces, pipeline):
    first = settled(notify(api), DeliveryStatus.DELIVERED)
    envelope = sent_with(pipeline, first)
    bounces(out_of_office(to=envelope, sender="pat@example.com"), to=envelope)
    kept = wait_for(lambda: BounceMail.objects.first(), what="the reply kept")
    assert (kept.outcome, kept.delivery_id) == (BounceOutcome.IGNORED, first.pk)
    assert b"out of the office" in bytes(kept.raw)
    first.refresh_from_db()
    assert first.status == DeliveryStatus.DELIVERED
    assert not AddressSuppression.objects.exists()


def test_a_bounce_to_a_forged_address_changes_nothing(api, pat, bounces, pipeline):
    first = settled(notify(api), DeliveryStatus.DELIVERED)
    forged = f"bounces+{first.pk}.0000000000000000@{DOMAIN}"
    bounces(dsn(to=forged, rcpt="pat@example.com", message_id=first.provider_message_id), to=forged)
    kept = wait_for(lambda: BounceMail.objects.first(), what="the bounce kept")
    assert kept.outcome == BounceOutcome.UNMATCHED
    first.refresh_from_db()
    assert first.status == DeliveryStatus.DELIVERED
    assert not AddressSuppression.objects.exists()
