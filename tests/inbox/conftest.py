"""The inbox component's fixtures: the ASGI app under uvicorn (the stream needs it) with
the demo page on, and one Chromium shared by the module's tests, a fresh page each."""

from __future__ import annotations

import os

import pytest

from tests.conftest import ARTIFACTS, CHROMIUM, CHROMIUM_ARGS
from tests.peers.tcp_cut import CuttableRelay
from tests.stream.server import asgi_process

# What the server runs with: two entries a page (paging shows with a few entries), the
# demo page on, pages on any origin allowed, and reconnect advice of exactly half a second
# (no jitter), so a refused stream's Retry-After is 1 s. Entries reach the stream through
# the pub/sub wake-up. The links it mints (the preference center's) point at itself.
INBOX_SERVER_SETTINGS = {
    "NOTIFY_PUBLIC_URL": "{url}",
    "NOTIFY_INBOX_DEMO": "1",
    "NOTIFY_INBOX_ALLOWED_ORIGINS": "*",  # the exact list is shown in test_cross_origin
    "NOTIFY_FEED_PAGE_SIZE": "2",
    "NOTIFY_STREAM_RETRY_MS": "500",
    "NOTIFY_STREAM_RETRY_JITTER": "0",
    "NOTIFY_STREAM_HEARTBEAT": "3",
    "NOTIFY_STREAM_SAFETY_POLL": "30",
}


@pytest.fixture(scope="session")
def inbox_server(worker_env):
    with asgi_process(worker_env, INBOX_SERVER_SETTINGS) as url:
        yield url


@pytest.fixture
def cuttable(inbox_server):
    """A relay in front of the inbox server whose connections the test can drop."""
    relay = CuttableRelay(int(inbox_server.rsplit(":", 1)[1]))
    yield relay
    relay.stop()


@pytest.fixture(scope="module")
def chromium():
    """One headless Chromium for the module (a launch costs about a second)."""
    from playwright.sync_api import sync_playwright

    if not os.path.exists(CHROMIUM):
        pytest.fail(f"Chromium is missing at {CHROMIUM}: run scripts/browser.sh")
    ARTIFACTS.mkdir(exist_ok=True)
    # Playwright's sync API keeps an event loop in this thread; the ORM calls the tests
    # make around it are still synchronous and safe.
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            try:
                yield browser
            finally:
                browser.close()


class ConsoleRecorder:
    """Every console message of type error and every uncaught page error."""

    def __init__(self, page) -> None:
        self.errors: list[str] = []
        page.on("console", lambda m: m.type == "error" and self.errors.append(m.text))
        page.on("pageerror", lambda error: self.errors.append(f"uncaught: {error}"))


@pytest.fixture
def inbox_page(chromium, inbox_server, monkeypatch):
    """A fresh browser context and page on the inbox server; `page.console.errors` lists
    what the console reported."""
    yield from browser_page_on(chromium, inbox_server, monkeypatch)


@pytest.fixture
def cuttable_page(chromium, cuttable, monkeypatch):
    """`inbox_page` through the cuttable relay (`page.relay`)."""
    for page in browser_page_on(chromium, cuttable.url, monkeypatch):
        page.relay = cuttable
        yield page


def browser_page_on(chromium, base_url: str, monkeypatch):
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    context = chromium.new_context(viewport={"width": 1100, "height": 800}, base_url=base_url)
    page = context.new_page()
    page.console = ConsoleRecorder(page)
    try:
        yield page
    finally:
        context.close()
