"""Fixtures shared by every folder whose tests push or stream (push, the stream, the
outbound guard): the local Web Push service (one per run: it listens on the port the
allow-list names) and the live stream's server. Registered in tests/conftest.py."""

from __future__ import annotations

import pytest

from tests.deliveries.push.peer import PushService
from tests.stream.server import asgi_process


@pytest.fixture(scope="session")
def push_service_peer():
    service = PushService()
    service.start()
    yield service
    service.stop()


@pytest.fixture
def push_service(push_service_peer):
    push_service_peer.reset()
    yield push_service_peer
    push_service_peer.reset()


@pytest.fixture(scope="session")
def asgi_server(worker_env):
    """The ASGI app under uvicorn, as deployed, on this run's database and Redis."""
    # A long safety poll: entries reach the stream fast only through the pub/sub wake-up.
    with asgi_process(
        worker_env, {"NOTIFY_STREAM_SAFETY_POLL": "30", "NOTIFY_STREAM_HEARTBEAT": "3"}
    ) as url:
        yield url
