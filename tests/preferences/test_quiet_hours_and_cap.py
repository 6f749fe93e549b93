"""Quiet hours and the daily cap with a controllable clock: the route and the release
run here with `now=`; the sends go through the real worker and SMTP peer."""

from __future__ import annotations

import threading
import uuid
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from django.db import connection

from deliveries.models import Delivery
from deliveries.pipeline.release import deferred_release
from deliveries.pipeline.routing import notification_route
from notify.models import Category, Notification, Producer, Recipient
from tests.preferences.conftest import LOGIN, PROMO, register, signup_consent
from tests.waiting import wait_for

pytestmark = pytest.mark.e2e

TOKYO = ZoneInfo("Asia/Tokyo")


def notification_for(user_id: str, category: str, payload: dict) -> Notification:
    """A stored notification, routed by the test itself (at the clock it chooses)."""
    producer, _ = Producer.objects.get_or_create(name="clock-test")
    return Notification.objects.create(
        producer=producer,
        event_id=str(uuid.uuid4()),
        recipient=Recipient.objects.get(user_id=user_id),
        category=Category.objects.get(key=category),
        payload=payload,
        fingerprint="-",
    )


def by_channel(notification: Notification) -> dict[str, Delivery]:
    return {d.channel: d for d in Delivery.objects.filter(notification=notification)}


def test_marketing_at_3am_in_tokyo_waits_until_9_while_a_login_code_goes_at_once(api, pipeline):
    smtp = pipeline
    register(api, "u-tokyo", timezone="Asia/Tokyo", quiet=True)  # default 21:00-09:00
    signup_consent(api, "u-tokyo")
    three_am = datetime(2026, 1, 10, 3, 0, tzinfo=TOKYO)  # in the past: due as soon as queued

    promo = notification_for("u-tokyo", "promo.weekly", PROMO)
    code = notification_for("u-tokyo", "security.login_code", LOGIN)
    notification_route(notification_id=str(promo.pk), now=three_am)
    notification_route(notification_id=str(code.pk), now=three_am)

    nine_am = datetime(2026, 1, 10, 9, 0, tzinfo=TOKYO)
    for delivery in by_channel(promo).values():
        if delivery.channel in ("inapp", "email"):
            assert (delivery.status, delivery.reason) == ("deferred", "quiet_hours")
            assert delivery.next_attempt_at == nine_am
    wait_for(lambda: by_channel(code)["email"].status == "delivered", what="login code delivered")
    assert [m.subject for m in smtp.received] != []  # the code went at 03:00

    assert deferred_release(now=nine_am - timedelta(minutes=1)) == 0
    assert by_channel(promo)["email"].status == "deferred"

    assert deferred_release(now=nine_am) == 2
    wait_for(
        lambda: {d.status for c, d in by_channel(promo).items() if c != "webpush"} == {"delivered"},
        what="promo delivered after 09:00",
    )
    assert len(wait_for(lambda: smtp.received if len(smtp.received) == 2 else None,
                        what="the promo email")) == 2  # fmt: skip
    assert Recipient.objects.get(user_id="u-tokyo").feed.get().title == "Winter sale"


def test_a_deferred_promo_is_dropped_if_the_user_opts_out_before_the_window_ends(api, pipeline):
    register(api, "u-tokyo2", timezone="Asia/Tokyo", quiet=True)
    signup_consent(api, "u-tokyo2")
    three_am = datetime(2026, 1, 10, 3, 0, tzinfo=TOKYO)
    promo = notification_for("u-tokyo2", "promo.weekly", PROMO)
    notification_route(notification_id=str(promo.pk), now=three_am)
    api.put(
        "/v1/users/u-tokyo2/preferences",
        {"categories": {"promo.weekly": {"email": False}}},
        format="json",
    )
    deferred_release(now=datetime(2026, 1, 10, 9, 0, tzinfo=TOKYO))
    email = by_channel(promo)["email"]
    assert (email.status, email.reason) == ("suppressed", "opted_out")
    wait_for(lambda: by_channel(promo)["inapp"].status == "delivered", what="in-app delivered")


def test_the_fourth_promo_of_a_local_day_is_capped_even_when_twenty_race(api, pipeline):
    register(api, "u-cap", timezone="Asia/Tokyo")
    signup_consent(api, "u-cap")
    noon = datetime(2026, 1, 12, 12, 0, tzinfo=TOKYO)
    promos = [notification_for("u-cap", "promo.weekly", PROMO) for _ in range(20)]

    def route(notification: Notification) -> None:
        try:
            notification_route(notification_id=str(notification.pk), now=noon)
        finally:
            connection.close()

    threads = [threading.Thread(target=route, args=(p,)) for p in promos]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    emails = Delivery.objects.filter(notification__in=promos, channel="email")
    assert emails.count() == 20
    assert emails.filter(status="suppressed", reason="frequency_cap").count() == 17
    assert emails.exclude(status="suppressed").count() == 3

    # 23:59 Tokyo is still the same local day; 00:00 is a new one.
    late = notification_for("u-cap", "promo.weekly", PROMO)
    notification_route(
        notification_id=str(late.pk), now=datetime(2026, 1, 12, 23, 59, tzinfo=TOKYO)
    )
    assert by_channel(late)["email"].reason == "frequency_cap"
    tomorrow = notification_for("u-cap", "promo.weekly", PROMO)
    notification_route(
        notification_id=str(tomorrow.pk), now=datetime(2026, 1, 13, 0, 0, tzinfo=TOKYO)
    )
    assert by_channel(tomorrow)["email"].status != "suppressed"
    # Let the worker finish what passed, so nothing is still sending when the test ends.
    sent = Delivery.objects.filter(notification__recipient__user_id="u-cap").exclude(
        status="suppressed"
    )
    wait_for(
        lambda: sent.count() == 8 and not sent.exclude(status="delivered").exists(),
        what="the four passing promos delivered on both channels",
    )


def test_a_recipients_own_quiet_window_set_through_the_api_moves_the_deferral(api, pipeline):
    register(api, "u-owl", timezone="Asia/Tokyo", quiet=True)
    signup_consent(api, "u-owl")
    owl_hours = {"quiet_hours": {"start": "23:00", "end": "07:30"}}
    answer = api.put("/v1/users/u-owl/preferences", owl_hours, format="json")
    assert answer.status_code == 200, answer.content
    assert api.get("/v1/users/u-owl/preferences").json()["quiet_hours"] == {
        "start": "23:00",
        "end": "07:30",
    }

    at_ten_pm = notification_for("u-owl", "promo.weekly", PROMO)  # outside the own window
    notification_route(notification_id=str(at_ten_pm.pk),
                       now=datetime(2026, 1, 10, 22, 0, tzinfo=TOKYO))  # fmt: skip
    assert by_channel(at_ten_pm)["email"].status != "deferred"

    at_midnight = notification_for("u-owl", "promo.weekly", PROMO)
    notification_route(notification_id=str(at_midnight.pk),
                       now=datetime(2026, 1, 11, 0, 30, tzinfo=TOKYO))  # fmt: skip
    email = by_channel(at_midnight)["email"]
    assert (email.status, email.reason) == ("deferred", "quiet_hours")
    assert email.next_attempt_at == datetime(2026, 1, 11, 7, 30, tzinfo=TOKYO)

    bad_hours = {"quiet_hours": {"start": "25:00", "end": "07:00"}}
    bad = api.put("/v1/users/u-owl/preferences", bad_hours, format="json")
    assert bad.status_code == 400
    assert bad.json()["error"]["field"] == "quiet_hours.start"
