"""The inbox demo page exists only when NOTIFY_INBOX_DEMO is on: it hands its person's
token to anyone."""

from __future__ import annotations

from django.test import Client

from notify.tokens import user_token_recipient_id
from preferences.center import preference_center_recipient


def test_the_demo_page_is_absent_unless_turned_on(demo_data, settings):
    settings.NOTIFY_INBOX_DEMO = False
    assert Client().get("/inbox/demo").status_code == 404
    assert Client().post("/inbox/demo/token").status_code == 404


def test_the_demo_page_embeds_the_inbox_with_a_working_token(demo_data, settings):
    settings.NOTIFY_INBOX_DEMO = True
    client = Client(enforce_csrf_checks=True)
    page = client.get("/inbox/demo")
    assert page.status_code == 200
    html = page.content.decode()
    assert '<script src="/static/notify/inbox.js" defer></script>' in html
    assert 'user-id="demo-user"' in html
    token = html.split('token="', 1)[1].split('"', 1)[0]
    assert user_token_recipient_id(token) is not None
    # The tab links to the person's preference center, through a fresh signed link.
    link = html.split('preferences-url="', 1)[1].split('"', 1)[0]
    assert link.startswith(f"{settings.NOTIFY_PUBLIC_URL}/preferences/")
    person = preference_center_recipient(token=link.rsplit("/", 1)[1])
    assert getattr(person, "user_id", person) == "demo-user"
    # A fresh token, for the page's token-expired handler, behind the CSRF check.
    assert client.post("/inbox/demo/token").status_code == 403
    csrf = client.cookies["csrftoken"].value
    fresh = client.post("/inbox/demo/token", HTTP_X_CSRFTOKEN=csrf)
    assert fresh.status_code == 200
    assert user_token_recipient_id(fresh.json()["token"]) is not None
