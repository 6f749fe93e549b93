"""Campaign pacing, local-time delivery and the estimate, as rules and on the database:
when each member falls due, and that the estimate is what routing then decides."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime, time, timedelta
from itertools import pairwise
from zoneinfo import ZoneInfo

import pytest
from django.db.models import F
from django.utils import timezone

from campaigns.estimate import campaign_estimate
from campaigns.models import Campaign
from campaigns.pacing import campaign_pace, campaign_send_at
from deliveries.models import AddressSuppression, Delivery
from deliveries.pipeline.routing import notifications_route
from notify.models import Category, Notification, Outbox, Recipient
from preferences.models import MarketingDayCount, Preference, QuietHours
from preferences.selectors import QuietWindow
from tests.campaigns.conftest import (
    NOON_UTC,
    email_only_category,
    fan_out_all,
    launch,
    seed_recipients,
)

pytestmark = pytest.mark.django_db

NO_QUIET = QuietWindow(time(0, 0), time(0, 0))


def person(zone: str) -> Recipient:
    return Recipient(user_id="p", timezone=zone)


def test_a_person_gets_a_local_time_campaign_at_their_next_ten_oclock():
    now = datetime(2026, 3, 2, 6, 0, tzinfo=UTC)  # 15:00 in Tokyo, 07:00 in Paris
    tokyo, paris = (
        campaign_send_at(
            recipient=person(zone), local_time=time(10, 0), quiet_window=NO_QUIET, now=now
        )
        for zone in ("Asia/Tokyo", "Europe/Paris")
    )
    assert tokyo == datetime(2026, 3, 3, 1, 0, tzinfo=UTC)  # tomorrow's 10:00 in Tokyo
    assert paris == datetime(2026, 3, 2, 9, 0, tzinfo=UTC)  # today's, three hours on
    assert all(now <= at < now + timedelta(hours=24) for at in (tokyo, paris))


def test_quiet_hours_at_that_moment_move_it_to_their_end():
    now = datetime(2026, 3, 2, 6, 0, tzinfo=UTC)
    quiet = QuietWindow(time(9, 30), time(11, 15))
    at = campaign_send_at(
        recipient=person("Europe/Paris"), local_time=time(10, 0), quiet_window=quiet, now=now
    )
    assert at == datetime(2026, 3, 2, 10, 15, tzinfo=UTC)  # 11:15 in Paris


def test_the_rate_is_at_most_the_low_share_of_the_provider_bucket(settings):
    limits = settings.NOTIFY_PROVIDER_RATE_LIMITS
    settings.NOTIFY_PROVIDER_RATE_LIMITS = {**limits, "smtp": "50:100"}
    settings.NOTIFY_LOW_PRIORITY_RESERVE = 0.2
    assert campaign_pace(requested=20, channels=["email", "inapp"]) == 20
    assert campaign_pace(requested=500, channels=["email"]) == 40  # 80 % of 50/s
    assert campaign_pace(requested=None, channels=["email"]) is None
    assert campaign_pace(requested=500, channels=["inapp"]) == 500  # no provider bucket


def outbox_dues(campaign: Campaign) -> dict[str, datetime]:
    """Each member's outbox row's due time, which is also their notification's send_at
    (its deadlines count from it)."""
    rows = Outbox.objects.filter(
        notification__event_id__startswith=campaign.event_id_prefix
    ).values_list("notification__recipient__user_id", "due_at", "notification__send_at")
    assert all(due == send_at for _, due, send_at in rows)
    return {user_id: due for user_id, due, _ in rows}


def test_a_paced_campaign_writes_each_members_row_due_at_its_turn(promo_data):
    seed_recipients(25, prefix="pace")
    campaign = launch()
    Campaign.objects.filter(pk=campaign.pk).update(send_rate=10)
    fan_out_all(campaign, batch_size=10)  # three batches: the schedule runs across them
    dues = outbox_dues(campaign)
    start = campaign.paced_from
    assert len(dues) == 25
    for i in range(25):
        assert dues[f"pace-{i:05d}"] == start + timedelta(seconds=i / 10)


def test_a_paced_campaign_resumed_after_a_pause_takes_its_turns_again_from_then(promo_data):
    from campaigns.control import campaign_pause, campaign_resume
    from campaigns.fanout import campaign_fan_out

    seed_recipients(30, prefix="pace")
    campaign = launch()
    Campaign.objects.filter(pk=campaign.pk).update(send_rate=10)
    campaign_fan_out(campaign_id=campaign.pk, batch_size=20)  # 20 of 30 made, then paused
    campaign_pause(campaign_id=campaign.pk)
    # The pause lasted long enough for the first schedule to pass entirely.
    Outbox.objects.filter(notification__event_id__startswith=campaign.event_id_prefix).update(
        due_at=F("due_at") - timedelta(hours=1)
    )
    resumed_at = timezone.now()
    campaign_resume(campaign_id=campaign.pk)
    fan_out_all(campaign, batch_size=20)
    dues = sorted(outbox_dues(campaign).values())
    assert len(dues) == 30
    assert resumed_at <= dues[0] <= resumed_at + timedelta(seconds=1)
    steps = {round((b - a).total_seconds(), 3) for a, b in pairwise(dues)}
    assert steps == {0.1}  # one every tenth of a second, the ten made after it included


def test_a_local_time_campaign_writes_each_members_row_due_at_their_ten_oclock(
    promo_data, settings
):
    settings.NOTIFY_CAMPAIGN_TIME_SCALE = 1
    seed_recipients(1, prefix="tokyo", timezone="Asia/Tokyo")
    seed_recipients(1, prefix="paris", timezone="Europe/Paris")
    [quiet] = seed_recipients(1, prefix="quiet", timezone="Europe/Paris")
    QuietHours.objects.filter(recipient=quiet).update(start=time(9, 0), end=time(10, 30))
    campaign = launch()
    Campaign.objects.filter(pk=campaign.pk).update(local_time=time(10, 0))
    fan_out_all(campaign)
    dues = outbox_dues(campaign)
    start = campaign.paced_from
    for user_id, zone, clock in [
        ("tokyo-00000", "Asia/Tokyo", time(10, 0)),
        ("paris-00000", "Europe/Paris", time(10, 0)),
        ("quiet-00000", "Europe/Paris", time(10, 30)),  # after their quiet hours
    ]:
        local = dues[user_id].astimezone(ZoneInfo(zone))
        assert local.time() == clock, user_id
        # The next ten o'clock is within a day; quiet hours move it on by their overlap
        # (when the run is between 10:00 and 10:30 in Paris, the quiet one's is tomorrow).
        after_ten = timedelta(hours=clock.hour - 10, minutes=clock.minute)
        assert start <= dues[user_id] < start + timedelta(hours=24) + after_ten


def test_the_time_scale_compresses_the_wait_until_local_time(promo_data, settings):
    settings.NOTIFY_CAMPAIGN_TIME_SCALE = 3600  # an hour a second
    seed_recipients(1, prefix="tokyo", timezone="Asia/Tokyo")
    campaign = launch()
    Campaign.objects.filter(pk=campaign.pk).update(local_time=time(10, 0))
    fan_out_all(campaign)
    [due] = outbox_dues(campaign).values()
    start = campaign.paced_from
    real = campaign_send_at(
        recipient=person("Asia/Tokyo"), local_time=time(10, 0), quiet_window=NO_QUIET, now=start
    )
    assert due - start == (real - start) / 3600


def mixed_audience() -> list[Recipient]:
    """Members the gate and routing treat each a different way, on email."""
    people = seed_recipients(10, prefix="ok")
    seed_recipients(3, prefix="nocons", consent=False)
    opted = seed_recipients(2, prefix="opted")
    bounced = seed_recipients(2, prefix="bounce")
    quiet = seed_recipients(2, prefix="quiet")
    capped = seed_recipients(1, prefix="capped")
    category = email_only_category()
    Preference.objects.bulk_create(
        [
            Preference(recipient=r, category=category, channel="email", enabled=False, source="api")
            for r in opted
        ]
    )
    AddressSuppression.objects.bulk_create(
        [AddressSuppression(channel="email", address=r.email, evidence="550") for r in bounced]
    )
    QuietHours.objects.filter(recipient__in=quiet).update(start=time(11, 0), end=time(13, 0))
    MarketingDayCount.objects.create(recipient=capped[0], local_date=NOON_UTC.date(), count=99)
    return people


def test_the_estimate_is_what_routing_then_decides_and_writes_nothing(promo_data, settings):
    settings.NOTIFY_MARKETING_DAILY_CAP = 3
    mixed_audience()
    category = email_only_category()
    probe = Campaign(category=category, payload={"headline": "Sale", "url": "https://x.example"},
                     audience_kind="segment", audience_spec={"has_email": True})  # fmt: skip
    before = (Campaign.objects.count(), Notification.objects.count(), list(
        MarketingDayCount.objects.values_list("recipient_id", "count")))  # fmt: skip
    estimate = campaign_estimate(campaign=probe, now=NOON_UTC)
    after = (Campaign.objects.count(), Notification.objects.count(), list(
        MarketingDayCount.objects.values_list("recipient_id", "count")))  # fmt: skip
    assert before == after  # nothing stored, nothing counted against the cap

    [email] = estimate.channels
    assert estimate.audience == 20
    assert (email.channel, email.send, email.deferred) == ("email", 10, 2)
    assert email.suppressed == {
        "address_suppressed": 2,
        "frequency_cap": 1,
        "no_consent": 3,
        "opted_out": 2,
    }

    campaign = launch("promo.mail", audience_kind="segment", spec={"has_email": True})
    fan_out_all(campaign)
    made = Notification.objects.filter(event_id__startswith=campaign.event_id_prefix)
    notifications_route(notification_ids=list(made.values_list("pk", flat=True)), now=NOON_UTC)
    routed = Counter(
        (status if status != "queued" else "send") if status != "suppressed" else reason
        for status, reason in Delivery.objects.filter(notification__in=made).values_list(
            "status", "reason"
        )
    )
    assert routed == Counter(
        {"send": 10, "deferred": 2, "address_suppressed": 2, "frequency_cap": 1,
         "no_consent": 3, "opted_out": 2}
    )  # fmt: skip


def test_the_estimate_renders_one_sample_per_locale_and_times_the_pace(promo_data):
    seed_recipients(30, prefix="en")
    seed_recipients(10, prefix="ru", locale="ru")
    probe = Campaign(
        category=Category.objects.get(key="promo.weekly"),
        payload={"headline": "<b>Sale</b>", "url": "https://shop.example/sale"},
        audience_kind="all",
        send_rate=4,
    )
    estimate = campaign_estimate(campaign=probe, now=timezone.now())
    assert estimate.rate == 4
    assert estimate.duration_seconds == pytest.approx(40 / 4)
    samples = {(s.locale, s.channel): s for s in estimate.samples}
    assert set(samples) == {(locale, channel) for locale in ("en", "ru")
                            for channel in ("inapp", "email", "webpush")}  # fmt: skip
    assert samples[("ru", "email")].template_locale == "ru"
    assert "Смотреть предложения" in samples[("ru", "email")].rendered["html"]
    assert samples[("en", "email")].rendered["subject"] == "<b>Sale</b>"


def test_a_large_audience_is_estimated_on_an_even_sample(promo_data, settings):
    settings.NOTIFY_CAMPAIGN_ESTIMATE_MEMBERS = 100
    seed_recipients(300, prefix="yes")
    seed_recipients(100, prefix="no", consent=False)
    probe = Campaign(
        category=email_only_category(),
        audience_kind="segment",
        audience_spec={"has_email": True},
    )
    estimate = campaign_estimate(campaign=probe, now=NOON_UTC)
    [email] = estimate.channels
    assert (estimate.audience, estimate.decided) == (400, 100)  # every fourth member
    assert email.send == pytest.approx(300, abs=8)
    assert email.suppressed["no_consent"] == pytest.approx(100, abs=8)
