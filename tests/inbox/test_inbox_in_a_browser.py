"""`<notify-inbox>` in Chromium on the demo page, against the ASGI app under uvicorn, a
real worker and relay: what is sent through the API appears live, the badge counts down as
entries are read, a dropped connection resumes with nothing missed, an expired token is
renewed by the host page, a refused stream waits as the server advises. Screenshots in
artifacts/; the console must stay clean."""

from __future__ import annotations

import contextlib
import http.server
import threading
import time
import uuid
from unittest import mock

import pytest
import redis
from django.conf import settings

from notify.models import FeedEntry, Recipient
from notify.tokens import user_token_issue
from preferences.models import SettingChange
from tests.conftest import screenshot
from tests.waiting import wait_for

pytestmark = pytest.mark.e2e

USER = "demo-user"
INBOX = "notify-inbox"


def send(api, order_number: str) -> str:
    """An in-app notification for the demo user, through the API; its notification id."""
    body = {
        "event_id": str(uuid.uuid4()),
        "user_id": USER,
        "category": "order.shipped",
        "payload": {"order_number": order_number, "delivery_date": "2026-12-24", "items_count": 1},
        "channels": ["inapp"],
    }
    response = api.post("/v1/notifications", body, format="json")
    assert response.status_code == 202, response.content
    return response.json()["notification_id"]


def feed_size() -> int:
    return FeedEntry.objects.filter(recipient__user_id=USER).count()


def badge(page) -> str:
    """What the bell's badge shows ('' when hidden)."""
    shown = page.locator(f"{INBOX} .badge")
    return shown.inner_text() if shown.is_visible() else ""


def titles(page) -> list[str]:
    return page.locator(f"{INBOX} li .title").all_inner_texts()


def stream_open(page) -> None:
    page.locator(f"{INBOX}[data-stream=open]").wait_for(state="attached", timeout=5000)


def test_a_sent_notification_appears_live_and_the_badge_counts_down_as_it_is_read(
    inbox_page, pipeline, api
):
    for number in ("A-1", "A-2", "A-3"):
        send(api, number)
    wait_for(lambda: feed_size() == 3, what="three feed entries")
    page = inbox_page
    page.goto("/inbox/demo")
    stream_open(page)
    assert badge(page) == "3"
    bell = page.locator(f"{INBOX} .bell")
    assert bell.get_attribute("aria-label") == "Notifications, 3 unread"

    # Keyboard: Enter opens the panel with focus on its first tab.
    bell.focus()
    page.keyboard.press("Enter")
    assert bell.get_attribute("aria-expanded") == "true"
    assert page.evaluate("document.activeElement.shadowRoot.activeElement.textContent") == "Inbox"
    assert titles(page) == ["Order A-3 is on its way", "Order A-2 is on its way"]
    page.locator(f"{INBOX} .more").click()  # the second page, through the cursor
    page.locator(f"{INBOX} li").nth(2).wait_for()
    assert page.locator(f"{INBOX} .more").is_hidden()

    # Live: no reload, sooner than the stream's safety poll (30 s).
    send(api, "LIVE-9")
    page.locator(f"{INBOX} li", has_text="Order LIVE-9").wait_for(timeout=5000)
    assert titles(page)[0] == "Order LIVE-9 is on its way"
    assert badge(page) == "4"
    screenshot(page, "inbox-live")

    # Read one, open one (the demo page routes links itself), then everything.
    page.locator(f"{INBOX} li", has_text="LIVE-9").get_by_role("button", name="Mark").click()
    wait_for(lambda: badge(page) == "3", timeout=5, what="the badge at 3")
    page.locator(f"{INBOX} li a", has_text="Order A-2").click()
    wait_for(lambda: badge(page) == "2", timeout=5, what="the badge at 2")
    assert "open-entry: " in page.locator("#events").inner_text()
    assert page.locator(f"{INBOX} li.unread").count() == 2
    page.locator(f"{INBOX} .mark-all").click()
    wait_for(lambda: badge(page) == "", timeout=5, what="the badge gone")
    assert bell.get_attribute("aria-label") == "Notifications, none unread"
    assert FeedEntry.objects.filter(recipient__user_id=USER, read_at__isnull=True).count() == 0
    assert api.get(f"/v1/users/{USER}/unread-count").json()["count"] == 0
    screenshot(page, "inbox-read")

    # Preferences by keyboard: arrow to the tab; a mandatory category is locked.
    page.locator(f"{INBOX} [role=tab]").first.focus()
    page.keyboard.press("ArrowRight")
    promo = page.locator(f'{INBOX} input[data-category="promo.weekly"][data-channel="inapp"]')
    promo.wait_for()
    assert page.locator(f'{INBOX} input[data-category="security.login_code"]').first.is_disabled()
    assert promo.is_checked()
    promo.press("Space")
    page.locator(f"{INBOX} .prefs-status", has_text="Saved").wait_for()
    preferences = api.get(f"/v1/users/{USER}/preferences").json()
    assert preferences["categories"]["promo.weekly"]["inapp"] is False
    screenshot(page, "inbox-preferences")

    page.keyboard.press("Escape")
    assert page.locator(f"{INBOX} .panel").is_hidden()
    assert page.evaluate("document.activeElement.shadowRoot.activeElement.className") == "bell"
    assert page.console.errors == []


def open_preferences(page) -> None:
    """Open the panel and arrow to the Preferences tab, as a keyboard user does."""
    bell = page.locator(f"{INBOX} .bell")
    bell.focus()
    page.keyboard.press("Enter")  # the panel opens with focus on its first tab
    page.keyboard.press("ArrowRight")
    page.locator(f"{INBOX} [role=tab][aria-selected=true]", has_text="Preferences").wait_for()


def test_time_zone_and_language_change_in_the_tab_and_persist_with_a_record_each(
    inbox_page, transactional_db, demo_data
):
    page = inbox_page
    page.goto("/inbox/demo")
    stream_open(page)
    open_preferences(page)
    zone = page.get_by_label("Time zone", exact=True)  # labelled for screen readers
    language = page.get_by_label("Language", exact=True)
    zone.wait_for(timeout=5000)
    assert (zone.input_value(), language.input_value()) == ("Europe/London", "en")
    assert "Deutsch (de)" in language.locator("option").all_inner_texts()

    # A name the server does not know: refused, the typed text stays to be corrected.
    zone.fill("Mars/Olympus_Mons")
    zone.press("Enter")
    status = page.locator(f"{INBOX} .prefs-status.error")
    status.wait_for(timeout=5000)
    assert "Unknown time zone" in status.inner_text()
    assert zone.input_value() == "Mars/Olympus_Mons"
    assert zone.get_attribute("aria-invalid") == "true"
    assert not SettingChange.objects.exists()

    # By keyboard: the zone, Tab to the language, Tab to the button, Enter.
    zone.fill("America/New_York")
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.shadowRoot.activeElement.className") == "lang"
    language.select_option("de")
    page.keyboard.press("Tab")
    page.keyboard.press("Enter")
    page.locator(f"{INBOX} .prefs-status", has_text="Saved: time zone and language").wait_for()
    assert "save-zone" in page.evaluate(
        "document.activeElement.shadowRoot.activeElement.className"
    )  # redrawn, focus kept
    recipient = Recipient.objects.get(user_id=USER)
    assert (recipient.timezone, recipient.locale) == ("America/New_York", "de")
    changes = SettingChange.objects.filter(recipient=recipient).order_by("id")
    assert [(c.setting, c.value, c.source) for c in changes] == [
        ("timezone", "America/New_York", "preference_center"),
        ("locale", "de", "preference_center"),
    ]
    screenshot(page, "inbox-preferences-zone")

    page.reload()
    stream_open(page)
    open_preferences(page)
    zone.wait_for(timeout=5000)
    assert (zone.input_value(), language.input_value()) == ("America/New_York", "de")
    assert page.console.errors == [  # the browser's own network log line for the refusal
        "Failed to load resource: the server responded with a status of 400 (Bad Request)"
    ]


def test_the_tab_links_to_the_persons_hosted_preference_center(
    inbox_page, transactional_db, demo_data
):
    page = inbox_page
    page.goto("/inbox/demo")
    stream_open(page)
    open_preferences(page)
    link = page.get_by_role("link", name="All notification settings")
    link.wait_for(timeout=5000)
    link.focus()
    with page.context.expect_page() as opened:
        page.keyboard.press("Enter")
    center = opened.value
    center.wait_for_load_state()
    assert "/preferences/" in center.url
    assert center.get_by_role("heading", name="Notification preferences").is_visible()
    assert center.get_by_label("Time zone", exact=True).input_value() == "Europe/London"
    screenshot(center, "inbox-preference-center")
    assert page.console.errors == []


def test_an_empty_feed_then_a_dropped_connection_resumes_with_nothing_missed(
    cuttable_page, pipeline, api
):
    page = cuttable_page
    page.goto("/inbox/demo")
    stream_open(page)
    page.locator(f"{INBOX} .bell").click()
    page.locator(f"{INBOX} .empty").wait_for()
    assert "no notifications yet" in page.locator(f"{INBOX} .empty").inner_text()
    screenshot(page, "inbox-empty")

    # The connection drops under the open stream; two notifications arrive meanwhile.
    page.relay.cut()
    page.locator(f"{INBOX}[data-stream=connecting]").wait_for(state="attached", timeout=5000)
    send(api, "GAP-1")
    send(api, "GAP-2")
    wait_for(lambda: feed_size() == 2, what="two feed entries")
    page.relay.restore()
    stream_open(page)
    page.locator(f"{INBOX} li").nth(1).wait_for(timeout=5000)
    assert sorted(titles(page)) == ["Order GAP-1 is on its way", "Order GAP-2 is on its way"]
    # The replay raced the count read again: the count is read once more after it, and
    # must end at 2, not 4 (each replayed entry counted on top of a count that held it).
    wait_for(lambda: badge(page) == "2", timeout=5, what="the badge at 2")
    time.sleep(0.3)
    assert badge(page) == "2"
    assert page.locator(f"{INBOX} .empty").is_hidden()
    screenshot(page, "inbox-resumed")
    # The browser itself logs the cut response; the component logs nothing.
    assert page.console.errors == ["Failed to load resource: net::ERR_INCOMPLETE_CHUNKED_ENCODING"]


def test_an_expired_token_is_renewed_by_the_host_page_and_the_request_goes_through(
    inbox_page, transactional_db, demo_data
):
    page = inbox_page
    page.goto("/inbox/demo")
    stream_open(page)
    recipient = Recipient.objects.get(user_id=USER)
    long_ago = time.time() - settings.NOTIFY_USER_TOKEN_TTL_SECONDS - 60
    with mock.patch("time.time", return_value=long_ago):
        expired = user_token_issue(recipient_id=recipient.pk)
    page.evaluate("token => { document.querySelector('notify-inbox').token = token }", expired)

    page.locator(f"{INBOX} .bell").click()
    page.locator(f"{INBOX} [role=tab]", has_text="Preferences").click()
    page.locator(f'{INBOX} input[data-category="order.shipped"]').first.wait_for(timeout=5000)
    assert "token-expired" in page.locator("#events").inner_text()
    fresh = page.evaluate("document.querySelector('notify-inbox').token")
    assert fresh not in ("", expired)
    # The browser's own network log line for the 401; the component logs nothing.
    assert page.console.errors == [
        "Failed to load resource: the server responded with a status of 401 (Unauthorized)"
    ]


def test_a_stream_refused_with_429_waits_as_advised_then_connects(
    inbox_page, transactional_db, demo_data
):
    recipient = Recipient.objects.get(user_id=USER)
    slots = f"notify:streams:user:{recipient.pk}"
    client = redis.Redis.from_url(settings.REDIS_URL)
    # The person already has every stream open elsewhere.
    client.zadd(slots, {f"elsewhere-{i}": time.time() + 600 for i in range(5)})
    page = inbox_page
    page.add_init_script(
        """window.__streamEvents = [];
        document.addEventListener('notify-inbox:stream', e =>
            window.__streamEvents.push({...e.detail, at: performance.now()}));"""
    )
    try:
        page.goto("/inbox/demo")
        refused = wait_for(
            lambda: [
                e
                for e in page.evaluate("window.__streamEvents")
                if e.get("status") == 429 and e["state"] == "waiting"
            ],
            timeout=5,
            what="the refusal",
        )[0]
        assert refused["retryMs"] == 1000  # Retry-After: 1, from the 500 ms advice
        client.delete(slots)
    finally:
        client.delete(slots)
    stream_open(page)
    events = page.evaluate("window.__streamEvents")
    opened = next(e for e in events if e["state"] == "open")
    assert opened["at"] - refused["at"] >= 950
    assert page.console.errors == [  # the browser's own network log line for the 429
        "Failed to load resource: the server responded with a status of 429 (Too Many Requests)"
    ]


def test_a_product_page_on_another_origin_embeds_the_inbox(inbox_page, inbox_server, pipeline, api):
    send(api, "X-1")
    wait_for(lambda: feed_size() == 1, what="a feed entry")
    token = user_token_issue(recipient_id=Recipient.objects.get(user_id=USER).pk)
    host = f"""<!doctype html><html lang="en"><title>Product</title>
        <script src="{inbox_server}/static/notify/inbox.js" defer></script>
        <notify-inbox api-base="{inbox_server}" user-id="{USER}" token="{token}"></notify-inbox>"""
    page = inbox_page
    with product_site(host) as product:  # another origin: another port
        page.goto(product)
        stream_open(page)
        assert badge(page) == "1"
        send(api, "X-2")
        wait_for(lambda: badge(page) == "2", timeout=5, what="the live entry counted")
        page.locator(f"{INBOX} .bell").click()
        assert titles(page)[0] == "Order X-2 is on its way"
        page.locator(f"{INBOX} .mark-all").click()
        wait_for(lambda: badge(page) == "", timeout=5, what="the badge gone")
    assert page.console.errors == []


@contextlib.contextmanager
def product_site(html: str):
    """A product's own web server on a loopback port, serving one page; yields its URL."""
    body = html.encode()

    class Page(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Page)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/account"
    finally:
        server.shutdown()
        server.server_close()
