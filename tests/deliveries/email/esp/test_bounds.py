"""Each provider's call ends by NOTIFY_ESP_CALL_DEADLINE, whatever the provider does: one
that drips its answer a byte at a time (no per-read timeout ever fires) is cut off, and
the email is retried later (a transient timeout), Amazon SES's boto3 call included."""

from __future__ import annotations

import time

from deliveries.channels.esp import kept_session_close
from deliveries.models import DeliveryAttempt, DeliveryStatus
from tests.deliveries.email.test_esp_email import email_to, sent
from tests.peers.drip import DripPeer

DEADLINE = 1.0


def test_a_drip_feeding_provider_is_cut_off_at_the_calls_deadline(person, esp, settings):
    drip = DripPeer(
        b"HTTP/1.1 200 OK\r\n" + b"X-Slow: " + b"a" * 10_000, every=0.2, reads_first=True
    )
    settings.NOTIFY_ESP_CALL_DEADLINE = DEADLINE
    settings.ANYMAIL = {**settings.ANYMAIL, **esp.anymail(f"{drip.origin}/")}
    kept_session_close()  # the next send opens a session with these settings
    started = time.monotonic()
    try:
        delivery = sent(email_to(person))
    finally:
        drip.stop()
    assert time.monotonic() - started < DEADLINE + 3
    assert delivery.status == DeliveryStatus.RETRYING
    [attempt] = DeliveryAttempt.objects.filter(delivery=delivery)
    assert attempt.status_code == "timeout", attempt.response
