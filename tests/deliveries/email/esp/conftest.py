"""The email providers' peers (tests/peers/<provider>.py), one of each per test process,
and `esp`: this process's email through one of them, each test run once per provider."""

from __future__ import annotations

import pytest

from deliveries.channels.esp import kept_session_close

# Postmark's tests' people, shared: `person` (in-process sends), `pat` (through the API).
from tests.deliveries.email.test_esp_email import person  # noqa: F401
from tests.peers.amazon_ses import AmazonSESPeer
from tests.peers.brevo import BrevoPeer
from tests.peers.esp import RESUBSCRIBE, SECRET, email_through
from tests.peers.mailgun import MailgunPeer
from tests.peers.sendgrid import SendGridPeer

# Each provider's token bucket in these tests (rate/s:burst).
RATE = "50:100"
PEERS = {peer.esp: peer for peer in (AmazonSESPeer, SendGridPeer, MailgunPeer, BrevoPeer)}


@pytest.fixture(scope="session")
def esp_peers():
    peers = {esp: peer_class() for esp, peer_class in PEERS.items()}
    for peer in peers.values():
        peer.start()
    yield peers
    for peer in peers.values():
        peer.stop()


@pytest.fixture(params=sorted(PEERS))
def esp(request, esp_peers, settings, clean_breakers):
    """Email goes through one provider's peer (each test runs once per provider); its
    webhooks are verified with SECRET and the peer's signing keys."""
    peer = email_through(settings, esp_peers[request.param], WEBHOOK_SECRET=[SECRET])
    settings.NOTIFY_CHANNELS_ENABLED = ["inapp", "email"]
    # Amazon SES's default is its sandbox's 1/s: a test's second email would wait for it.
    settings.NOTIFY_PROVIDER_RATE_LIMITS = {**settings.NOTIFY_PROVIDER_RATE_LIMITS, peer.esp: RATE}
    kept_session_close()
    yield peer
    kept_session_close()


# Answers and reports a provider never gives, so no test is made for them: Amazon SES
# refuses no address when it takes a message (a bad one comes back later as a Bounce
# event); Mailgun and Brevo post no resubscribe.
NOT_ANSWERED = {("amazon_ses", "bad_address")} | {
    (esp, RESUBSCRIBE) for esp, peer in PEERS.items() if not peer.resubscribes
}


def pytest_collection_modifyitems(config, items):
    """Leave out the tests of answers a provider never gives (not skipped: not made)."""
    kept, left_out = [], []
    for item in items:
        params = getattr(getattr(item, "callspec", None), "params", {})
        pair = (params.get("esp"), params.get("answer", params.get("report")))
        never = all(isinstance(p, str) for p in pair) and pair in NOT_ANSWERED
        (left_out if never else kept).append(item)
    if left_out:
        config.hook.pytest_deselected(items=left_out)
        items[:] = kept
