"""`<notify-inbox>` in the person's language, in Chromium: a Russian person (on a page
that says it is English) sees every tab, the empty feed, live entries and an error in
Russian — no string of the English catalog shows or is spoken — with the categories'
Russian names; the same person with `locale=en` sees English; an element's `lang` wins.
Screenshots of both languages, inbox and hosted preference center, go to artifacts/lang-*
(kept in the repository)."""

from __future__ import annotations

import json
import uuid

import pytest

from notify.models import Category, Recipient
from notify.tokens import user_token_issue
from preferences.tokens import preference_center_url
from tests.conftest import ARTIFACTS
from tests.preferences.english import PageText, django_pieces, english_pieces, english_shown
from tests.preferences.test_languages import RUSSIAN
from tests.waiting import wait_for

pytestmark = pytest.mark.e2e

PERSON = "demo-user-ru"  # seed_demo's Russian person (ru-RU, Europe/Moscow)
INBOX = "notify-inbox"
# A product's page, in English, with the bell 360 px in (so its panel fits a small shot).
SHOP = """<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Shop</title>
<link rel="icon" href="data:,"><script src="/static/notify/inbox.js" defer></script></head>
<body style="margin:0;font:15px system-ui"><header style="padding:8px 8px 8px 360px">{inbox}
</header></body></html>"""
SHOT = {"x": 0, "y": 0, "width": 440, "height": 600}  # the bell and its open panel


def open_shop(page, server: str, **attributes: str) -> None:
    """Serve the product's page from the inbox server's own origin and open it."""
    tag = "".join(f' {name.replace("_", "-")}="{value}"' for name, value in attributes.items())
    body = SHOP.format(inbox=f"<{INBOX}{tag}></{INBOX}>")
    page.route(f"{server}/shop", lambda route: route.fulfill(body=body, content_type="text/html"))
    page.goto("/shop")


def person_inbox(page, server: str, **extra: str) -> None:
    person = Recipient.objects.get(user_id=PERSON)
    center = preference_center_url(recipient_id=person.pk).split("/preferences/", 1)[1]
    open_shop(page, server, user_id=PERSON, token=user_token_issue(recipient_id=person.pk),
              preferences_url=f"{server}/preferences/{center}", **extra)  # fmt: skip


def inbox_english(page) -> list[str]:
    """The English catalog's strings whose Russian differs (each must be complete)."""
    strings = page.evaluate("JSON.stringify(customElements.get('notify-inbox').strings)")
    en, ru = json.loads(strings)["en"], json.loads(strings)["ru"]
    assert set(ru) == set(en), "the Russian catalog lacks a string"
    translated = {key: ru[key] if isinstance(ru[key], str) else json.dumps(ru[key]) for key in ru}
    return english_pieces((source, translated[key]) for key, source in en.items())


def said(page) -> str:
    """What the open inbox shows and says: the panel's rendered text, the live region, and
    every accessible name and title inside."""
    return page.evaluate(
        """sel => { const root = document.querySelector(sel).shadowRoot;
        const parts = [root.querySelector('.panel').innerText,
                       root.querySelector('.live').textContent];
        for (const node of root.querySelectorAll('[aria-label], [title]')) {
          parts.push(node.getAttribute('aria-label') || '', node.getAttribute('title') || '');
        }
        return parts.join('\\n'); }""",
        INBOX,
    )


def assert_russian(page) -> str:
    text = said(page)
    assert english_shown(text, inbox_english(page)) == [], text
    return text


def shot(page, name: str) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), clip=SHOT)


def send(api, number: str) -> None:
    body = {"event_id": str(uuid.uuid4()), "user_id": PERSON, "category": "order.shipped",
            "payload": {"order_number": number, "delivery_date": "2026-12-24", "items_count": 2},
            "channels": ["inapp"]}  # fmt: skip
    assert api.post("/v1/notifications", body, format="json").status_code == 202


def test_a_russian_person_sees_every_tab_empty_feed_entries_and_errors_in_russian(
    inbox_page, inbox_server, pipeline, api
):
    for key, texts in RUSSIAN.items():
        Category.objects.filter(key=key).update(labels={"ru": texts})
    page = inbox_page
    person_inbox(page, inbox_server)
    page.locator(f"{INBOX}[data-stream=open]").wait_for(state="attached", timeout=5000)
    bell = page.locator(f"{INBOX} .bell")
    bell.click()
    page.locator(f"{INBOX} .empty", has_text="уведомлений пока нет").wait_for(timeout=5000)
    assert bell.get_attribute("aria-label") == "Уведомления, непрочитанных нет"
    assert_russian(page)

    send(api, "R-1")
    send(api, "R-2")
    page.locator(f"{INBOX} li").nth(1).wait_for(timeout=5000)
    wait_for(lambda: bell.get_attribute("aria-label") == "Уведомления, 2 непрочитанных",
             timeout=5, what="the bell's Russian name")  # fmt: skip
    text = assert_russian(page)
    assert "Заказ №R-2 в пути" in text and "Прочитать все" in text and "Прочитано" in text
    shot(page, "lang-ru-inbox")

    page.locator(f"{INBOX} [role=tab]", has_text="Настройки").click()
    page.locator(f'{INBOX} input[data-category="promo.weekly"]').first.wait_for(timeout=5000)
    text = assert_russian(page)
    for words in ("Заказы", "Когда заказ покинул склад.", "Предложения недели", "Эл. почта"):
        assert words in text
    shot(page, "lang-ru-inbox-preferences")

    # An error: a time zone Notify does not know, told in Russian, not the server's English.
    zone = page.get_by_label("Часовой пояс", exact=True)
    zone.fill("Mars/Olympus_Mons")
    zone.press("Enter")
    page.locator(f"{INBOX} .prefs-status.error").wait_for(timeout=5000)
    assert "Неизвестный часовой пояс" in assert_russian(page)
    assert page.console.errors == [
        "Failed to load resource: the server responded with a status of 400 (Bad Request)"
    ]

    # The same person in English: every word changes with their locale.
    Recipient.objects.filter(user_id=PERSON).update(locale="en")
    page.reload()
    page.locator(f"{INBOX}[data-stream=open]").wait_for(state="attached", timeout=5000)
    bell.click()
    page.locator(f"{INBOX} [role=tab]", has_text="Inbox").wait_for(timeout=5000)
    text = said(page)
    assert "Заказ №R-2 в пути" in text  # an entry keeps the language it was written in
    assert "Mark all as read" in text and "Notifications, 2 unread" in text
    shot(page, "lang-en-inbox")


def test_the_lang_attribute_wins_and_an_unavailable_inbox_says_so_in_it(
    inbox_page, inbox_server, transactional_db, demo_data
):
    other = Recipient.objects.get(user_id="demo-user")  # a token for someone else's inbox
    page = inbox_page
    open_shop(page, inbox_server, user_id=PERSON, lang="ru",
              token=user_token_issue(recipient_id=other.pk))  # fmt: skip
    page.locator(f"{INBOX} .bell").click()
    status = page.locator(f"{INBOX} .status.error")
    status.wait_for(timeout=5000)
    assert status.inner_text() == "Уведомления здесь недоступны."
    assert_russian(page)
    assert page.console.errors and all("403 (Forbidden)" in line for line in page.console.errors)


def test_screenshots_of_the_preference_center_in_both_languages(
    inbox_page, inbox_server, transactional_db, demo_data
):
    for key, texts in RUSSIAN.items():
        Category.objects.filter(key=key).update(labels={"ru": texts})
    person = Recipient.objects.get(user_id=PERSON)
    path = "/preferences/" + preference_center_url(recipient_id=person.pk).split("/preferences/")[1]
    page = inbox_page
    page.set_viewport_size({"width": 760, "height": 600})
    page.goto(path)
    assert page.locator("html").get_attribute("lang") == "ru"
    html = page.content()
    assert english_shown(PageText.of(html), django_pieces()) == []
    page.screenshot(path=str(ARTIFACTS / "lang-ru-preference-center.png"), full_page=True)

    Recipient.objects.filter(pk=person.pk).update(locale="en")
    page.goto(path)
    assert page.get_by_role("heading", name="Notification preferences").is_visible()
    page.screenshot(path=str(ARTIFACTS / "lang-en-preference-center.png"), full_page=True)
    assert page.console.errors == []
