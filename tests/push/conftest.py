"""Push fixtures: a local Web Push service, a local FCM, and the ASGI app under uvicorn."""

from __future__ import annotations

import contextlib

import pytest

from tests.push.peer import PushService


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
def fcm_service_peer(tmp_path_factory):
    from tests.push.fcm_peer import FcmService

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


@pytest.fixture(scope="session")
def asgi_server(worker_env):
    """The ASGI app under uvicorn, as deployed, on this run's database and Redis."""
    # A long safety poll: entries reach the stream fast only through the pub/sub wake-up.
    with asgi_process(
        worker_env, {"NOTIFY_STREAM_SAFETY_POLL": "30", "NOTIFY_STREAM_HEARTBEAT": "3"}
    ) as url:
        yield url


@contextlib.contextmanager
def asgi_process(worker_env: dict[str, str], overrides: dict[str, str]):
    """Run the ASGI app under uvicorn with these settings ("{url}" in a value: the
    server's own base URL); yields its base URL."""
    import socket
    import subprocess
    import sys
    import time

    from tests.conftest import ARTIFACTS, ROOT

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    base = f"http://127.0.0.1:{port}"
    # An override may name the server's own address as "{url}" (its public URL, say).
    env = {**worker_env, **{name: v.replace("{url}", base) for name, v in overrides.items()}}
    ARTIFACTS.mkdir(exist_ok=True)
    log = open(ARTIFACTS / "asgi-push.log", "ab")  # noqa: SIM115 - the child's for its life
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "uvicorn",
            "config.asgi:application",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--log-level",
            "warning",
        ],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    deadline = time.monotonic() + 30
    while True:
        if process.poll() is not None:
            raise RuntimeError("uvicorn exited at start; see artifacts/asgi-push.log")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            break
        except OSError:
            if time.monotonic() > deadline:
                process.kill()
                raise RuntimeError("uvicorn did not listen in 30s") from None
            time.sleep(0.1)
    try:
        yield base
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
