"""A person sees Notify's own pages and words in their language: the preference center,
the unsubscribe page and the email footer for a Russian person show no English string of
our catalog, with the categories' Russian names, dates and times as Russian writes them in
the person's zone; the same person with `locale=en` sees English. Category names per
language are bounded, edited in admin and served by the API."""

from __future__ import annotations

import re
from datetime import time

import pytest
from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.test import Client

from deliveries.models import Delivery
from deliveries.pipeline.attempt import delivery_attempt
from deliveries.pipeline.routing import notification_route
from notify.admin import CategoryForm
from notify.models import Category, Notification, Producer, Recipient
from preferences.models import QuietHours
from preferences.services import RequestOrigin, marketing_consent_grant
from preferences.tokens import preference_center_url, unsubscribe_url
from tests.preferences.english import PageText, django_pieces, english_shown
from tests.preferences.test_preference_center import changed, forms_of, path_of, post_form

# The demo categories' Russian names, as marketing would enter them in admin.
RUSSIAN = {
    "security.login_code": {"label": "Код для входа", "description": "Одноразовый код."},
    "order.shipped": {"label": "Заказы", "description": "Когда заказ покинул склад."},
    "promo.weekly": {"label": "Предложения недели", "description": ""},
}
PROMO = {"headline": "Зимняя распродажа", "url": "https://shop.example/sale"}


@pytest.fixture
def labelled(demo_data):
    for key, texts in RUSSIAN.items():
        Category.objects.filter(key=key).update(labels={"ru": texts})


@pytest.fixture
def russian(labelled):
    """A Russian person in Moscow, with marketing consent and no quiet hours."""
    person = Recipient.objects.create(
        user_id="lang-ru", email="lang-ru@example.com", locale="ru-RU", timezone="Europe/Moscow"
    )
    QuietHours.objects.create(recipient=person, start=time(0, 0), end=time(0, 0))
    marketing_consent_grant(recipient=person, origin=RequestOrigin(source="signup"))
    return person


def assert_no_english(html: str) -> str:
    text = PageText.of(html)
    assert english_shown(text, django_pieces()) == [], text
    return text


def test_a_russian_person_sees_the_preference_center_in_russian(russian):
    browser = Client(enforce_csrf_checks=True)
    path = path_of(preference_center_url(recipient_id=russian.pk))
    page = browser.get(path, HTTP_ACCEPT_LANGUAGE="en-US,en;q=0.9")  # the browser says English
    html = page.content.decode()
    assert page.status_code == 200 and '<html lang="ru">' in html
    text = assert_no_english(html)
    shown = ("Настройки уведомлений", "Эл. почта", "Заказы", "Предложения недели",
             "Когда заказ покинул склад.", "Включено всегда", "русский (ru)")  # fmt: skip
    for words in shown:
        assert words in text
    # Quiet hours (none here: 00:00 to 00:00) as Russian writes times, in the person's zone.
    assert "00:00 до 00:00, часовой пояс Europe/Moscow." in text

    # A refused form says why in Russian (Django's own messages included).
    save, revoke = forms_of(page)
    refused = post_form(browser, path, changed(save, timezone="Mars/Olympus_Mons"))
    assert refused.status_code == 400
    text = assert_no_english(refused.content.decode())
    assert "Ничего не сохранено" in text and "Часовой пояс: Выберите корректный вариант" in text

    # Switching the links off names the moment, in Moscow time, as Russian writes it.
    done = post_form(browser, path, revoke)
    text = assert_no_english(done.content.decode())
    assert "Ссылки отключены" in text
    assert re.search(r"до \d{1,2} \w+\.? \d{4}\s\w\., \d{1,2}:\d{2}:\d{2}", text), text
    # The link, now withdrawn, still says so in the person's language.
    withdrawn = browser.get(path)
    assert withdrawn.status_code == 410
    assert "Эта ссылка отозвана" in assert_no_english(withdrawn.content.decode())


def test_the_same_person_with_locale_en_sees_english(russian):
    Recipient.objects.filter(pk=russian.pk).update(locale="en")
    page = Client().get(
        path_of(preference_center_url(recipient_id=russian.pk)), HTTP_ACCEPT_LANGUAGE="ru"
    )
    html = page.content.decode()
    assert '<html lang="en">' in html
    text = PageText.of(html)
    for words in ("Notification preferences", "Always on", "Email", "An order left the warehouse",
                  "Weekly offers", "Save preferences", "12:00\u202fAM"):  # fmt: skip
        assert words in text, words
    assert "Заказы" not in text  # the Russian label is for Russian readers only


def test_the_unsubscribe_page_is_in_the_persons_language(russian):
    promo = Category.objects.get(key="promo.weekly")
    path = path_of(unsubscribe_url(recipient_id=russian.pk, category_id=promo.pk, channel="email"))
    mail_client = Client(HTTP_ACCEPT_LANGUAGE="en")

    asked = mail_client.get(path)
    assert asked.status_code == 200
    assert "Отписаться" in assert_no_english(asked.content.decode())
    done = mail_client.post(path)
    assert done.status_code == 200 and not done.cookies
    text = assert_no_english(done.content.decode())
    assert "Вы больше не будете получать сообщения «Предложения недели»." in text

    # A link nobody signed names no person: the default language.
    forged = mail_client.get(path[:-3] + "xyz")
    assert forged.status_code == 400 and "Invalid link" in forged.content.decode()

    Recipient.objects.filter(pk=russian.pk).update(locale="en")
    assert "You will no longer receive “Weekly offers” messages." in PageText.of(
        mail_client.post(path).content.decode()
    )


def send_email(person: Recipient, key: str, payload: dict, event_id: str):
    producer, _ = Producer.objects.get_or_create(name="languages")
    notification = Notification.objects.create(
        producer=producer, event_id=event_id, recipient=person,
        category=Category.objects.get(key=key), payload=payload, channels=["email"],
        fingerprint="x",
    )  # fmt: skip
    notification_route(notification_id=str(notification.pk))
    delivery_attempt(delivery_id=Delivery.objects.get(notification=notification).pk)


def without_links(text: str) -> str:
    return re.sub(r"https?://\S+", "", text)


def test_the_email_footer_is_in_the_persons_language(russian, mail):
    send_email(russian, "promo.weekly", PROMO, "lang-1")
    [received] = mail.received
    plain, html = received.part("text/plain").replace("\r\n", "\n"), received.part("text/html")
    assert re.search(r"^Отписаться: http\S+/u/\S+$", plain, re.M), plain
    assert re.search(r"^Настроить уведомления: http\S+/preferences/\S+$", plain, re.M), plain
    assert ">Отписаться</a>" in html and ">Настроить уведомления</a>" in html
    for body in (plain, PageText.of(html)):
        assert english_shown(without_links(body), django_pieces()) == [], body

    mail.handler.reset()
    Recipient.objects.filter(pk=russian.pk).update(locale="en")
    send_email(Recipient.objects.get(pk=russian.pk), "promo.weekly", PROMO, "lang-2")
    [received] = mail.received
    plain = received.part("text/plain").replace("\r\n", "\n")
    assert re.search(r"^Unsubscribe: http", plain, re.M)
    assert re.search(r"^Manage your notification preferences: http", plain, re.M)


def test_category_labels_are_bounded_edited_in_admin_and_served(russian, api, client):
    category = Category.objects.get(key="order.shipped")
    for bad in ({"xx": {"label": "?"}}, {"ru": {"label": "я" * 101}}, {"ru": {"title": "?"}},
                {"ru": "Заказы"}, ["ru"]):  # fmt: skip
        category.labels = bad
        with pytest.raises(ValidationError) as refused:
            category.full_clean()
        assert "labels" in refused.value.message_dict, bad

    # Admin: a label and a description per language, kept in `labels`.
    form = CategoryForm(instance=Category.objects.get(key="order.shipped"))
    # What the page's form posts back untouched (each value as the field shows it).
    data = {name: form[name].value() for name in form.fields}
    data = {name: value for name, value in data.items() if value is not None and value is not False}
    data.update(label_ru="Мои заказы", description_ru="", label_en="Orders")
    saved = CategoryForm(data, instance=Category.objects.get(key="order.shipped"))
    assert saved.is_valid(), saved.errors
    saved.save()
    assert Category.objects.get(key="order.shipped").labels == {
        "en": {"label": "Orders"}, "ru": {"label": "Мои заказы"},
    }  # fmt: skip
    too_long = CategoryForm({**data, "label_ru": "я" * 101}, instance=category)
    assert not too_long.is_valid() and "label_ru" in too_long.errors
    staff = User.objects.create_superuser("editor", "editor@example.com", "pw")
    client.force_login(staff)
    page = client.get(f"/admin/notify/category/{category.pk}/change/").content.decode()
    assert "Label (Русский)" in page and 'value="Мои заказы"' in page

    # The API: every language for producers, the person's own in their preferences.
    listed = {c["key"]: c for c in api.get("/v1/categories").json()["results"]}["order.shipped"]
    assert listed["labels"] == {
        "en": {"label": "Orders", "description": ""},
        "ru": {"label": "Мои заказы", "description": ""},
    }
    labels = api.get("/v1/users/lang-ru/preferences").json()["labels"]
    assert labels["order.shipped"] == {"label": "Мои заказы", "description": ""}
    assert labels["promo.weekly"]["label"] == "Предложения недели"
    Recipient.objects.filter(pk=russian.pk).update(locale="de")  # no German: the default's
    labels = api.get("/v1/users/lang-ru/preferences").json()["labels"]
    assert labels["order.shipped"] == {"label": "Orders", "description": ""}
    assert labels["promo.weekly"] == {"label": "Weekly offers", "description": ""}
