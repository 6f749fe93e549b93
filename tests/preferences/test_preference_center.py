"""The hosted preference center: opened from the link in an email's footer, driven as a
browser without JavaScript would (read the form, tick boxes, post it back with its CSRF
token), refused clearly when the link is tampered, expired or revoked."""

from __future__ import annotations

import time
from html.parser import HTMLParser
from urllib.parse import urlsplit

import pytest
from django.contrib.auth.models import User
from django.core import signing
from django.test import Client

from deliveries.models import Delivery
from deliveries.pipeline.attempt import delivery_attempt
from deliveries.pipeline.routing import notification_route
from notify.api_keys import api_key_issue
from notify.models import Category, Notification, Producer, Recipient
from notify.roles import support_group_ensure
from notify.tokens import user_token_issue
from preferences.center import preference_center_links_revoke
from preferences.models import ConsentRecord, Preference, QuietHours, SettingChange
from preferences.tokens import PREFERENCE_CENTER_SALT, preference_center_url

ORDER = {"order_number": "A-1", "delivery_date": "2026-12-03", "items_count": 1}


class FormReader(HTMLParser):
    """What a browser would post for each form of a page: hidden fields, ticked boxes,
    field values and the selected option of each select (disabled fields never)."""

    def __init__(self) -> None:
        super().__init__()
        self.forms: list[list[tuple[str, str]]] = []
        self._select: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "form":
            self.forms.append([])
        elif tag == "input" and a.get("name") and "disabled" not in a:
            if a.get("type") != "checkbox" or "checked" in a:
                self.forms[-1].append((a["name"], a.get("value") or ""))
        elif tag == "select":
            self._select = a.get("name")
        elif tag == "option" and self._select and "selected" in a:
            self.forms[-1].append((self._select, a.get("value") or ""))

    def handle_endtag(self, tag: str) -> None:
        if tag == "select":
            self._select = None


def forms_of(page) -> list[list[tuple[str, str]]]:
    reader = FormReader()
    reader.feed(page.content.decode())
    return reader.forms


def post_form(browser: Client, path: str, fields: list[tuple[str, str]]):
    """Post fields as a browser encodes a form (repeated names kept)."""
    data: dict[str, list[str]] = {}
    for name, value in fields:
        data.setdefault(name, []).append(value)
    return browser.post(path, data)


def changed(fields, *, untick=(), tick=(), **values) -> list[tuple[str, str]]:
    """The form's fields with some boxes unticked or ticked and some values replaced."""
    out = [(n, v) for n, v in fields if not (n == "cell" and v in untick) and n not in values]
    return out + [("cell", v) for v in tick] + list(values.items())


@pytest.fixture
def person(demo_data):
    return Recipient.objects.create(
        user_id="pc-1", email="pc-1@example.com", locale="en", timezone="Europe/Berlin"
    )


@pytest.fixture
def browser():
    """A browser with no session: only the link and the CSRF cookie the page sets."""
    return Client(enforce_csrf_checks=True)


def path_of(url: str) -> str:
    return urlsplit(url).path


def emailed_link(person: Recipient, mail) -> str:
    """Send `person` an order email through the channel and read the link from its footer."""
    producer, _ = Producer.objects.get_or_create(name="center")
    notification = Notification.objects.create(
        producer=producer, event_id="pc-e1", recipient=person,
        category=Category.objects.get(key="order.shipped"), payload=ORDER, channels=["email"],
        fingerprint="x",
    )  # fmt: skip
    notification_route(notification_id=str(notification.pk))
    delivery_attempt(delivery_id=Delivery.objects.get(notification=notification).pk)
    [received] = mail.received
    text = received.part("text/plain")
    [line] = [ln for ln in text.splitlines() if "preferences" in ln.lower()]
    link = line.rsplit(" ", 1)[-1]
    assert f'href="{link}"' in received.part("text/html")
    return link


def test_the_link_in_an_emails_footer_opens_the_page_and_a_change_is_a_consent_record(
    person, mail, browser, api
):
    link = emailed_link(person, mail)
    page = browser.get(path_of(link))
    assert page.status_code == 200
    assert page["Cache-Control"] == "no-store" and page["Referrer-Policy"] == "no-referrer"
    html = page.content.decode()
    assert "One-time login code" in html and "Always on" in html
    save, _revoke = forms_of(page)
    assert ("cell", "order.shipped:email") in save
    assert ("cell", "security.login_code:email") not in save  # locked: shown disabled

    done = post_form(browser, path_of(link), changed(save, untick={"order.shipped:email"}))
    assert done.status_code == 303
    again = browser.get(done["Location"])
    assert "saved" in again.content.decode()

    [record] = ConsentRecord.objects.filter(recipient=person)
    assert (record.category.key, record.channel, record.granted, record.source) == (
        "order.shipped", "email", False, "preference_center",
    )  # fmt: skip
    cells = api.get("/v1/users/pc-1/preferences").json()["categories"]["order.shipped"]
    assert cells["email"] is False and cells["inapp"] is True
    # The page now shows it off; posting the same form again writes nothing more.
    [save, _] = forms_of(again)
    assert ("cell", "order.shipped:email") not in save
    post_form(browser, path_of(link), save)
    assert ConsentRecord.objects.filter(recipient=person).count() == 1


def test_a_mandatory_category_stays_on_whatever_a_forged_post_says(person, browser, api):
    path = path_of(preference_center_url(recipient_id=person.pk))
    save, _ = forms_of(browser.get(path))
    # Claims the locked cells were shown and left unticked (that is: turned off).
    forged = [
        *save,
        ("shown", "security.login_code:email"),
        ("shown", "security.login_code:sms"),
        ("cell", "security.login_code:nonsense"),
    ]
    assert post_form(browser, path, forged).status_code == 303

    assert not ConsentRecord.objects.filter(recipient=person).exists()
    assert not Preference.objects.filter(recipient=person).exists()
    cells = api.get("/v1/users/pc-1/preferences").json()["categories"]["security.login_code"]
    assert cells == {"email": True, "sms": True}


def test_quiet_hours_time_zone_and_language_change_with_a_record_each(person, browser):
    path = path_of(preference_center_url(recipient_id=person.pk))
    save, _ = forms_of(browser.get(path))
    bad = changed(save, timezone="Mars/Olympus_Mons", quiet_start="25:00")
    refused = post_form(browser, path, bad)
    assert refused.status_code == 400
    assert "Nothing was saved" in refused.content.decode()
    assert not SettingChange.objects.exists()

    ok = changed(save, timezone="America/New_York", locale="ru", quiet_start="22:30",
                 quiet_end="07:15")  # fmt: skip
    assert post_form(browser, path, ok).status_code == 303

    person.refresh_from_db()
    assert (person.timezone, person.locale) == ("America/New_York", "ru")
    quiet = QuietHours.objects.get(recipient=person)
    assert (f"{quiet.start:%H:%M}", f"{quiet.end:%H:%M}") == ("22:30", "07:15")
    changes = SettingChange.objects.filter(recipient=person).order_by("id")
    assert [(c.setting, c.value, c.source) for c in changes] == [
        ("quiet_hours", "22:30-07:15", "preference_center"),
        ("timezone", "America/New_York", "preference_center"),
        ("locale", "ru", "preference_center"),
    ]


def test_a_post_without_the_csrf_token_changes_nothing(person, browser):
    path = path_of(preference_center_url(recipient_id=person.pk))
    save, _ = forms_of(browser.get(path))
    forged = [(n, v) for n, v in changed(save, untick={"order.shipped:email"})
              if n != "csrfmiddlewaretoken"]  # fmt: skip
    assert post_form(browser, path, forged).status_code == 403
    assert not ConsentRecord.objects.filter(recipient=person).exists()


class _MintedLongAgo(signing.TimestampSigner):
    def timestamp(self) -> str:
        return signing.b62_encode(int(time.time()) - 3600)


def test_tampered_and_expired_links_get_a_page_that_says_so(person, browser, settings):
    path = path_of(preference_center_url(recipient_id=person.pk))
    save, _ = forms_of(browser.get(path))  # the form a person has open, with its CSRF token
    for tampered in (path[:-2] + ("xy" if not path.endswith("xy") else "zz"), "/preferences/x"):
        for page in (browser.get(tampered), post_form(browser, tampered, save)):
            assert page.status_code == 400, tampered
            assert "This link is not valid" in page.content.decode()

    settings.NOTIFY_PREFERENCE_CENTER_LINK_MAX_AGE = 600
    token = _MintedLongAgo(salt=PREFERENCE_CENTER_SALT).sign_object(
        {"r": person.pk, "i": time.time_ns() // 1000}
    )
    expired = f"/preferences/{token}"
    for page in (browser.get(expired), post_form(browser, expired, save)):
        assert page.status_code == 410
        assert "This link has expired" in page.content.decode()
    assert not ConsentRecord.objects.filter(recipient=person).exists()
    assert browser.get(path).status_code == 200  # a fresh one still opens

    Recipient.objects.filter(pk=person.pk).delete()  # erased: the link's person is gone
    page = browser.get(path)
    assert page.status_code == 410 and "Nothing to show" in page.content.decode()


def test_revoked_links_are_refused_and_fresh_ones_work(person, browser, api):
    old = path_of(preference_center_url(recipient_id=person.pk))
    assert browser.get(old).status_code == 200

    assert api.delete("/v1/users/pc-1/preference-center-link").status_code == 204
    page = browser.get(old)
    assert page.status_code == 410 and "withdrawn" in page.content.decode()

    # The inbox asks for a fresh link with the person's own token.
    own = Client(HTTP_AUTHORIZATION=f"Bearer {user_token_issue(recipient_id=person.pk)}")
    answer = own.post("/v1/users/pc-1/preference-center-link")
    assert answer.status_code == 201, answer.content
    assert answer.json()["expires_in"] > 0
    fresh = path_of(answer.json()["url"])
    assert browser.get(fresh).status_code == 200
    assert own.post("/v1/users/demo-user/preference-center-link").status_code == 403

    # A producer key needs `users:tokens` to mint one and `preferences:write` to revoke.
    reader = Client(
        HTTP_AUTHORIZATION=f"Bearer {api_key_issue(producer_name='r', scopes=['users:read']).key}"
    )
    assert reader.post("/v1/users/pc-1/preference-center-link").status_code == 403
    assert reader.delete("/v1/users/pc-1/preference-center-link").status_code == 403
    assert browser.get(fresh).status_code == 200

    # The page's own button switches off every link, itself included.
    _, revoke = forms_of(browser.get(fresh))
    assert post_form(browser, fresh, revoke).status_code == 200
    assert browser.get(fresh).status_code == 410


def test_support_reads_setting_changes_and_revocations_in_admin(person, client):
    SettingChange.objects.create(recipient=person, setting="timezone", value="Asia/Tokyo",
                                 source="preference_center")  # fmt: skip
    preference_center_links_revoke(recipient=person)
    agent = User.objects.create_user("sam", "sam@example.com", "pw", is_staff=True)
    agent.groups.add(support_group_ensure())
    client.force_login(agent)
    changes = client.get("/admin/preferences/settingchange/", {"q": "pc-1"})
    assert changes.status_code == 200 and b"Asia/Tokyo" in changes.content
    revoked = client.get("/admin/preferences/preferencecenterlinks/", {"q": "pc-1"})
    assert revoked.status_code == 200 and b"pc-1" in revoked.content
