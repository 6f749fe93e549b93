"""Email through each provider on real processes: the API takes the notifications,
worker processes send them through the provider's peer on loopback, and the peer's
webhooks are posted over HTTP to the running server, signed as that provider signs
them (as tests/deliveries/email/test_esp_e2e.py does for Postmark)."""

from __future__ import annotations

import pytest

from deliveries.models import AddressSuppression, DeliveryStatus, ProviderEvent, Reason
from tests.deliveries.email.esp.conftest import RATE
from tests.deliveries.email.test_esp_e2e import notify, settled


@pytest.fixture
def esp_workers(esp, workers_with):
    """Workers that send email through the provider's peer (this process, the live
    server's, verifies its webhooks: the `esp` fixture)."""
    workers_with(NOTIFY_EMAIL_ESP=esp.esp, **{f"NOTIFY_RATE_{esp.esp.upper()}": RATE}, **esp.env())
    return esp


def test_an_email_is_delivered_then_bounces_on_real_processes(api, pat, esp_workers, live_server):
    """The email goes through the provider with its message id kept; `delivered` makes it
    reached; a forged bounce is refused and records nothing; the bounce, posted twice, is
    recorded once and suppresses the address: the next email is never tried."""
    peer, url = esp_workers, live_server.url + esp_workers.hook
    first = settled(notify(api), DeliveryStatus.DELIVERED)
    assert [m["message_id"] for m in peer.received] == [first.provider_message_id]

    delivered = peer.event("delivered", first.provider_message_id, pat.email)
    assert peer.signed(delivered).to_url(url) == 200
    settled(first, DeliveryStatus.REACHED)

    bounce = peer.event("hard_bounce", first.provider_message_id, pat.email)
    assert 400 <= peer.signed(bounce, good=False).to_url(url) < 500
    assert ProviderEvent.objects.count() == 1  # the forged post recorded nothing
    post = peer.signed(bounce)
    assert [post.to_url(url), post.to_url(url)] == [200, 200]  # the second a replay
    first.refresh_from_db()
    assert (first.status, first.reason) == (DeliveryStatus.FAILED, Reason.BOUNCED)
    assert ProviderEvent.objects.count() == 2
    assert AddressSuppression.objects.filter(address="pat@example.com").exists()

    second = settled(notify(api), DeliveryStatus.SUPPRESSED)
    assert (second.reason, second.attempts) == (Reason.ADDRESS_SUPPRESSED, 0)
    assert len(peer.received) == 1
