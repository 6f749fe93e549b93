"""End-user tokens and the consent history through the HTTP API."""

from __future__ import annotations

from urllib.parse import urlsplit

from rest_framework.test import APIClient

from notify.models import Category, Recipient
from preferences.models import SettingChange
from preferences.selectors import consent_history
from preferences.tokens import unsubscribe_url
from tests.preferences.conftest import register, signup_consent


def user_client(api, user_id: str) -> APIClient:
    response = api.post(f"/v1/users/{user_id}/tokens")
    assert response.status_code == 201, response.content
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {response.json()['token']}")
    return client


def test_a_user_token_reaches_only_its_own_feed_and_preferences(api):
    register(api, "u-a")
    register(api, "u-b")
    alice = user_client(api, "u-a")

    assert alice.get("/v1/users/u-a/feed").status_code == 200
    assert alice.get("/v1/users/u-a/unread-count").status_code == 200
    assert alice.get("/v1/users/u-a/preferences").status_code == 200
    changed = alice.put(
        "/v1/users/u-a/preferences",
        {"categories": {"order.shipped": {"email": False}}, "source": "support"},
        format="json",
    )
    assert changed.status_code == 200
    assert changed.json()["categories"]["order.shipped"]["email"] is False
    record = consent_history(recipient=Recipient.objects.get(user_id="u-a"))[-1]
    assert record.source == "preference_center"  # a user cannot claim to be support

    for response in (
        alice.get("/v1/users/u-b/feed"),
        alice.get("/v1/users/u-b/unread-count"),
        alice.get("/v1/users/u-b/preferences"),
        alice.put("/v1/users/u-b/preferences", {"categories": {}}, format="json"),
        alice.post("/v1/users/u-b/tokens"),
        alice.post("/v1/notifications", {}, format="json"),
    ):
        assert response.status_code in (403, 404), response.content
    assert api.get("/v1/users/u-b/preferences").json()["categories"]["order.shipped"]["email"]

    forged = APIClient()
    forged.credentials(HTTP_AUTHORIZATION="Bearer ut_eyJyIjoxfQ:1xY1iL:forged")
    assert forged.get("/v1/users/u-a/feed").status_code == 401


def test_a_user_token_reads_and_changes_time_zone_and_language_with_a_record_each(api):
    register(api, "u-tz", timezone="UTC", locale="en")
    person = user_client(api, "u-tz")
    url = "/v1/users/u-tz/preferences"
    shown = person.get(url).json()
    assert (shown["timezone"], shown["locale"]) == ("UTC", "en")
    assert shown["languages"][:2] == ["en", "de"]  # what the settings offer

    # Checked as the user upsert checks them: an IANA name, a language tag.
    for bad in ({"timezone": "Mars/Olympus_Mons"}, {"timezone": ""}, {"locale": "english!"}):
        refused = person.put(url, bad, format="json")
        assert refused.status_code == 400, refused.content
    assert not SettingChange.objects.exists()

    changed = person.put(url, {"timezone": "Asia/Tokyo", "locale": "pt_BR"}, format="json")
    assert changed.status_code == 200, changed.content
    assert (changed.json()["timezone"], changed.json()["locale"]) == ("Asia/Tokyo", "pt-BR")
    assert changed.json()["languages"][-1] == "pt-BR"  # the person's own is offered too
    recipient = Recipient.objects.get(user_id="u-tz")
    assert (recipient.timezone, recipient.locale) == ("Asia/Tokyo", "pt-BR")
    # Saying the same again records nothing more; a producer's change says it is the API's.
    assert person.put(url, {"timezone": "Asia/Tokyo"}, format="json").status_code == 200
    assert api.put(url, {"locale": "de"}, format="json").status_code == 200
    changes = SettingChange.objects.filter(recipient=recipient).order_by("id")
    assert [(c.setting, c.value, c.source) for c in changes] == [
        ("timezone", "Asia/Tokyo", "preference_center"),
        ("locale", "pt-BR", "preference_center"),
        ("locale", "de", "api"),
    ]


def test_consent_history_shows_signup_api_and_email_link_in_order(api, anon_client):
    register(api, "u-hist")
    signup_consent(api, "u-hist", channels=("email",))
    response = api.put(
        "/v1/users/u-hist/preferences",
        {"categories": {"promo.weekly": {"inapp": True}}},
        format="json",
        HTTP_USER_AGENT="shop-backend/1.0",
    )
    assert response.status_code == 200
    recipient = Recipient.objects.get(user_id="u-hist")
    link = unsubscribe_url(
        recipient_id=recipient.pk,
        category_id=Category.objects.get(key="promo.weekly").pk,
        channel="email",
    )
    assert anon_client.post(urlsplit(link).path).status_code == 200

    history = consent_history(recipient=recipient)
    assert [(r.source, r.granted, r.channel) for r in history] == [
        ("signup", True, "email"),
        ("api", True, "inapp"),
        ("email_link", False, ""),
    ]
    assert history[0].text_version == "signup-2026-01"
    assert history[1].user_agent == "shop-backend/1.0"
    assert all(r.category.key == "promo.weekly" for r in history)


def test_demo_users_receive_promo_because_they_consented_at_signup(demo_data):
    from datetime import datetime
    from zoneinfo import ZoneInfo

    from notify.models import Notification, Producer
    from preferences.gate import channels_for, decide_deliveries

    notification = Notification.objects.create(
        producer=Producer.objects.create(name="demo-check"),
        event_id="demo-promo",
        recipient=Recipient.objects.get(user_id="demo-user"),
        category=Category.objects.get(key="promo.weekly"),
        payload={"headline": "Hi", "url": "https://shop.example"},
        fingerprint="-",
    )
    noon = datetime(2026, 1, 12, 12, 0, tzinfo=ZoneInfo("Europe/London"))
    verdicts = {
        d.channel: d
        for d in decide_deliveries(
            notification, channels=channels_for(notification), push_targets={}, now=noon
        )
    }
    assert verdicts["email"].allowed and verdicts["inapp"].allowed
    evening = noon.replace(hour=22)
    verdicts = {
        d.channel: d
        for d in decide_deliveries(
            notification, channels=channels_for(notification), push_targets={}, now=evening
        )
    }
    assert (verdicts["email"].status, verdicts["email"].reason) == ("deferred", "quiet_hours")
