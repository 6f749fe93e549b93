"""Push fixtures: a local FCM (the local Web Push service is shared by several folders:
tests/peers/push_fixtures.py)."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def fcm_service_peer(tmp_path_factory):
    from tests.deliveries.push.fcm_peer import FcmService

    service = FcmService(tmp_path_factory.mktemp("fcm"))
    service.start()
    yield service
    service.stop()


@pytest.fixture
def fcm_service(fcm_service_peer, settings):
    """firebase-admin in this process, pointed at the local FCM (tests call services)."""
    settings.FCM_CREDENTIALS = str(fcm_service_peer.credentials_path)
    settings.FCM_SEND_URL = fcm_service_peer.send_url
    fcm_service_peer.reset()
    yield fcm_service_peer
    fcm_service_peer.reset()
