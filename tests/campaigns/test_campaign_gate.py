"""Campaign notifications pass the same gate as any event: opt-outs and missing consent
end suppressed with their reasons, quiet hours defer, the daily cap suppresses. The route
runs here in-process with `now=` to set the clock."""

from __future__ import annotations

from datetime import datetime
from zoneinfo import ZoneInfo

import pytest

from campaigns.selectors import campaign_progress
from deliveries.models import Delivery
from deliveries.pipeline.routing import notification_route
from notify.models import Category
from preferences.models import MarketingDayCount, Preference
from tests.campaigns.conftest import (
    NOON_UTC,
    campaign_notifications,
    fan_out_all,
    launch,
    seed_recipients,
)

pytestmark = pytest.mark.django_db


def route_all(campaign, now: datetime) -> dict[str, dict[str, tuple[str, str]]]:
    """Route every campaign notification at `now`; {user_id: {channel: (status, reason)}}."""
    for notification_id in campaign_notifications(campaign).values_list("pk", flat=True):
        notification_route(notification_id=notification_id, now=now)
    outcome: dict[str, dict[str, tuple[str, str]]] = {}
    for user_id, channel, status, reason in Delivery.objects.filter(
        notification__in=campaign_notifications(campaign)
    ).values_list("notification__recipient__user_id", "channel", "status", "reason"):
        outcome.setdefault(user_id, {})[channel] = (status, reason)
    return outcome


def test_opted_out_and_unconsented_recipients_end_suppressed_with_reasons(promo_data):
    promo = Category.objects.get(key="promo.weekly")
    (fine,) = seed_recipients(1, prefix="fine")
    (opted,) = seed_recipients(1, prefix="opted")
    Preference.objects.create(
        recipient=opted, category=promo, channel="email", enabled=False, source="api"
    )
    (no_consent,) = seed_recipients(1, prefix="noconsent", consent=False)
    capped = seed_recipients(1, prefix="capped")[0]
    MarketingDayCount.objects.create(recipient=capped, local_date=NOON_UTC.date(), count=3)
    # A segment (not "everyone with consent"), so the unconsented one is asked too.
    campaign = launch(audience_kind="segment", spec={"has_email": True})
    fan_out_all(campaign)

    outcome = route_all(campaign, NOON_UTC)

    assert outcome[fine.user_id]["inapp"] == ("delivered", "")
    assert outcome[fine.user_id]["email"] == ("queued", "")
    assert outcome[fine.user_id]["webpush"] == ("suppressed", "no_address")
    assert outcome[opted.user_id]["email"] == ("suppressed", "opted_out")
    assert outcome[opted.user_id]["inapp"] == ("delivered", "")
    assert outcome[no_consent.user_id]["inapp"] == ("suppressed", "no_consent")
    assert outcome[no_consent.user_id]["email"] == ("suppressed", "no_consent")
    assert outcome[capped.user_id]["email"] == ("suppressed", "frequency_cap")

    progress = campaign_progress(campaign)
    assert progress.members == {"delivered": 2, "suppressed": 2}  # in-app reached two
    assert sum(progress.members.values()) == progress.audience_size == 4
    assert ("suppressed", "no_consent", 2) in progress.deliveries


def test_quiet_hours_defer_a_campaign_to_the_end_of_the_window(promo_data):
    tokyo = ZoneInfo("Asia/Tokyo")
    seed_recipients(3, prefix="tokyo", quiet=True, timezone="Asia/Tokyo")  # 21:00-09:00
    campaign = launch()
    fan_out_all(campaign)

    outcome = route_all(campaign, datetime(2026, 1, 10, 3, 0, tzinfo=tokyo))

    for channels in outcome.values():
        assert channels["inapp"] == ("deferred", "quiet_hours")
        assert channels["email"] == ("deferred", "quiet_hours")
    nine = datetime(2026, 1, 10, 9, 0, tzinfo=tokyo)
    assert set(
        Delivery.objects.filter(reason="quiet_hours").values_list("next_attempt_at", flat=True)
    ) == {nine}
    assert campaign_progress(campaign).members == {"deferred": 3}
