"""A support person in a real browser: finds the user and reads why things happened."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.utils import timezone

from deliveries.models import Delivery, DeliveryAttempt
from notify.models import Category, Notification, Producer, Recipient
from notify.roles import support_group_ensure
from preferences.services import RequestOrigin, marketing_consent_grant, preferences_update
from tests.conftest import screenshot


@pytest.fixture
def support_user(transactional_db) -> User:
    user = User.objects.create_user("sam", "sam@support.example", "support-pass", is_staff=True)
    user.groups.add(support_group_ensure())
    return user


@pytest.fixture
def history(transactional_db, demo_data) -> Recipient:
    recipient = Recipient.objects.create(user_id="u-42", email="mia@example.com", locale="en")
    producer = Producer.objects.create(name="shop")
    promo = Notification.objects.create(
        producer=producer,
        event_id="promo-1",
        recipient=recipient,
        category=Category.objects.get(key="promo.weekly"),
        payload={"headline": "Sale", "url": "https://shop.example"},
        fingerprint="x",
    )
    now = timezone.now()
    Delivery.objects.create(
        notification=promo,
        channel="inapp",
        target="feed",
        queue="low",
        status="delivered",
        attempts=1,
        provider_message_id="feed:1",
    )
    Delivery.objects.create(
        notification=promo,
        channel="email",
        target="mia@example.com",
        queue="low",
        status="suppressed",
        reason="opted_out",
    )
    push = Delivery.objects.create(
        notification=promo,
        channel="webpush",
        target="7",
        queue="low",
        status="failed",
        reason="rejected",
        attempts=1,
        last_error="410 push subscription has expired",
    )
    DeliveryAttempt.objects.create(
        delivery=push,
        number=1,
        started_at=now,
        duration_ms=81,
        outcome="permanent",
        status_code="410",
        response="push subscription has expired",
    )
    marketing_consent_grant(recipient=recipient, origin=RequestOrigin(source="signup"))
    preferences_update(
        recipient=recipient,
        cells={"promo.weekly": {"email": False}},
        origin=RequestOrigin(source="api"),
    )
    return recipient


def test_support_finds_the_user_by_email_and_reads_each_channels_story(
    browser_page, support_user, history
):
    page = browser_page
    page.goto(f"{page.base_url}/admin/login/?next=/admin/notify/recipient/")
    page.fill("#id_username", "sam")
    page.fill("#id_password", "support-pass")
    page.click("input[type=submit]")

    page.fill("#searchbar", "mia@exa")
    page.press("#searchbar", "Enter")
    page.click("text=u-42")
    page.wait_for_selector("#timeline")
    screenshot(page, "support-recipient-timeline")

    rows = {
        row.get_attribute("data-channel"): row for row in page.query_selector_all(".nt-delivery")
    }
    assert "Delivered" in rows["inapp"].inner_text()
    email = rows["email"].inner_text()
    assert "Suppressed" in email and "opted out" in email
    push = rows["webpush"]
    push.query_selector("summary").click()
    assert "410" in push.inner_text() and "push subscription has expired" in push.inner_text()
    screenshot(page, "support-failed-push-attempts")

    consent = page.inner_text("#consents-group")
    assert "signup" in consent.lower() and "api" in consent.lower()
    preferences = page.inner_text("#preferences-group")
    assert "promo.weekly" in preferences
    screenshot(page, "support-preferences-and-consent")

    # Read-only: the support person gets no form to change the recipient or a preference.
    assert page.query_selector("input[name=_save]") is None
    assert page.query_selector("input#id_email") is None
    assert page.query_selector("#preferences-group input[type=checkbox]") is None
    page.goto(f"{page.base_url}/admin/preferences/preference/")
    assert page.query_selector("input[name=_selected_action]") is None
    assert "Add preference" not in page.content()
