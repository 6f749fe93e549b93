"""`<notify-inbox>` in Chromium links an entry only to an http(s) URL or a path on the
site: an entry stored with a `javascript:` link (in any disguise), `data:` or `//host`
shows its title with nothing to click."""

from __future__ import annotations

import pytest

from notify.feed import feed_entry_create
from notify.models import Category, Notification, Producer, Recipient
from tests.conftest import screenshot
from tests.inbox.test_inbox_in_a_browser import INBOX, USER, stream_open

pytestmark = pytest.mark.e2e

# title → the url stored with it (written straight to the feed, as an old row would be).
ENTRIES = {
    "Plain script": "javascript:alert(1)",
    "Mixed case, leading space": " JaVaScRiPt:alert(1)",
    "Tab inside": "java\tscript:alert(1)",
    "Control character first": "\x01javascript:alert(1)",
    "Data": "data:text/html,<script>alert(1)</script>",
    "Another site": "//evil.example/x",
    "Absolute https": "https://shop.example/orders/1",
    "Path on the site": "/orders/2",
}
LINKED = {"Absolute https": "https://shop.example/orders/1", "Path on the site": "/orders/2"}


def test_an_entry_with_an_unsafe_link_shows_without_one(inbox_page, transactional_db, demo_data):
    person = Recipient.objects.get(user_id=USER)
    producer, _ = Producer.objects.get_or_create(name="links")
    category = Category.objects.get(key="order.shipped")
    for number, (title, url) in enumerate(ENTRIES.items()):
        notification = Notification.objects.create(
            producer=producer,
            event_id=f"link-{number}",
            recipient=person,
            category=category,
            payload={},
            fingerprint="x",
        )
        feed_entry_create(notification=notification, title=title, body="", url=url)
    page = inbox_page
    dialogs: list[str] = []
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    page.goto("/inbox/demo")
    stream_open(page)
    page.locator(f"{INBOX} .bell").click()
    shown = page.locator(f"{INBOX} li")
    shown.first.wait_for(timeout=5000)
    while shown.count() < len(ENTRIES):  # two entries a page
        before = shown.count()
        page.locator(f"{INBOX} .more").click()
        shown.nth(before).wait_for(timeout=5000)

    links = {
        link.inner_text(): link.get_attribute("href")
        for link in page.locator(f"{INBOX} li a").all()
    }
    assert links == LINKED
    for title in ENTRIES:  # every entry is shown, linked or not
        assert page.locator(f"{INBOX} li .title", has_text=title).count() == 1
    page.locator(f"{INBOX} li .title", has_text="Plain script").click()
    screenshot(page, "inbox-unsafe-links")
    assert dialogs == []
    assert page.console.errors == []
