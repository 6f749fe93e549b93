"""An unsubscribe is an event written with the change: the one-click link of a campaign's
email names its message, so the campaign's report counts it; a preference-center
opt-out counts each cell turned off; a spam complaint names the message complained of.
One statement each, none with analytics off, none for a replay."""

from __future__ import annotations

from urllib.parse import urlsplit

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from analytics.events import person_hash
from analytics.models import AnalyticsEvent
from analytics.store.shipper import batch_ship
from campaigns.models import Campaign
from deliveries.models import Delivery
from deliveries.pipeline.attempt import delivery_attempt
from deliveries.pipeline.routing import notification_route
from notify.models import Category, Notification
from tests.campaigns.conftest import seed_recipients
from tests.preferences.test_preference_center import (
    changed,
    emailed_link,
    forms_of,
    path_of,
    post_form,
)

PROMO = {"headline": "Winter sale", "url": "https://shop.example/sale"}
EVENTS_INSERT = f"INSERT INTO {AnalyticsEvent._meta.db_table}"


def _inserts(queries: CaptureQueriesContext) -> int:
    return sum(1 for q in queries.captured_queries if EVENTS_INSERT in q["sql"])


@pytest.fixture
def campaign(producer_key):
    return Campaign.objects.create(
        name="Winter sale",
        producer=producer_key.api_key.producer,
        category=Category.objects.get(key="promo.weekly"),
        payload=PROMO,
        audience_kind="all",
        audience_spec={},
        launched_at=timezone.now(),
    )


def _campaign_email(campaign: Campaign, mail, user_id: str) -> tuple[Delivery, str]:
    """Route and send the campaign's email to `user_id` (consenting) in this process,
    through the SMTP peer; its delivery and the path of its one-click link."""
    [person] = seed_recipients(1, prefix=user_id)
    notification = Notification.objects.create(
        producer_id=campaign.producer_id, event_id=f"{campaign.event_id_prefix}{person.pk}",
        recipient=person, category=campaign.category, payload=PROMO, channels=["email"],
        fingerprint="x",
    )  # fmt: skip
    notification_route(notification_id=str(notification.pk))
    delivery = Delivery.objects.get(notification=notification, channel="email")
    delivery_attempt(delivery_id=delivery.pk)
    [received] = mail.received
    header = str(received.message["List-Unsubscribe"]).strip()
    assert str(received.message["List-Unsubscribe-Post"]) == "List-Unsubscribe=One-Click"
    return delivery, urlsplit(header[1:-1]).path


def test_a_campaign_emails_unsubscribe_link_is_counted_in_the_campaign_report(
    api, campaign, mail, store
):
    delivery, path = _campaign_email(campaign, mail, "unsub")
    mail_client = Client(enforce_csrf_checks=True)  # a mail client: no cookie, no login

    assert mail_client.get(path).status_code == 200  # a scanner's GET changes nothing
    assert not AnalyticsEvent.objects.filter(kind="unsubscribed").exists()
    with CaptureQueriesContext(connection) as queries:
        assert mail_client.post(path).status_code == 200
    assert _inserts(queries) == 1
    assert mail_client.post(path).status_code == 200  # a replay changes nothing: no event

    [event] = AnalyticsEvent.objects.filter(kind="unsubscribed")
    assert (event.delivery_id, event.notification_id) == (delivery.pk, delivery.notification_id)
    assert (event.producer_id, event.campaign_id) == (campaign.producer_id, campaign.pk)
    assert (event.category, event.channel, event.provider) == ("promo.weekly", "email", "smtp")
    assert (event.reason, event.person) == ("email_link", person_hash("unsub-00000"))

    batch_ship(store=store)
    report = api.get(f"/v1/campaigns/{campaign.pk}/report")
    assert report.status_code == 200, report.content
    email = report.json()["channels"]["email"]
    assert (email["audience"], email["sent"], email["delivered"]) == (1, 1, 1)
    assert email["unsubscribed"] == 1


def test_a_link_made_before_links_named_their_message_still_counts_the_category(
    campaign, analytics_on
):
    from preferences.tokens import unsubscribe_url

    [person] = seed_recipients(1, prefix="old")
    promo = Category.objects.get(key="promo.weekly")
    link = unsubscribe_url(recipient_id=person.pk, category_id=promo.pk, channel="email")
    assert Client().post(urlsplit(link).path).status_code == 200
    [event] = AnalyticsEvent.objects.filter(kind="unsubscribed")
    assert (event.delivery_id, event.campaign_id, event.category) == (None, None, "promo.weekly")
    assert event.producer_id == promo.owner_id
    assert event.person == person_hash("old-00000")


def test_a_preference_center_opt_out_counts_each_cell_turned_off_in_one_statement(
    demo_data, mail, settings, analytics_on
):
    [person] = seed_recipients(1, prefix="pc")
    link = emailed_link(person, mail)
    browser = Client(enforce_csrf_checks=True)
    [save, _] = forms_of(browser.get(path_of(link)))
    cells = {"order.shipped:email", "order.shipped:inapp"}
    with CaptureQueriesContext(connection) as queries:
        done = post_form(browser, path_of(link), changed(save, untick=cells))
    assert done.status_code == 303
    assert _inserts(queries) == 1
    events = AnalyticsEvent.objects.filter(kind="unsubscribed")
    assert sorted(events.values_list("category", "channel", "reason", "delivery_id")) == [
        ("order.shipped", "email", "preference_center", None),
        ("order.shipped", "inapp", "preference_center", None),
    ]
    owner = Category.objects.get(key="order.shipped").owner_id
    assert set(events.values_list("producer_id", "person")) == {
        (owner or 0, person_hash("pc-00000"))
    }

    # Ticking a box back is no unsubscribe; with analytics off nothing is written.
    [save, _] = forms_of(browser.get(path_of(link)))
    with CaptureQueriesContext(connection) as queries:
        post_form(browser, path_of(link), changed(save, tick={"order.shipped:email"}))
    assert _inserts(queries) == 0
    settings.NOTIFY_ANALYTICS_ENABLED = False
    [save, _] = forms_of(browser.get(path_of(link)))
    with CaptureQueriesContext(connection) as queries:
        post_form(browser, path_of(link), changed(save, untick={"order.shipped:email"}))
    assert _inserts(queries) == 0
    assert events.count() == 2
