"""A local-time campaign with a rate: people who share a moment (one zone's 10:00) take
turns at the rate from it, the waits kept as outbox due times in PostgreSQL, and the
estimate times the same schedule."""

from __future__ import annotations

from datetime import UTC, datetime, time, timedelta
from itertools import pairwise
from zoneinfo import ZoneInfo

import pytest
from django.utils import timezone

from campaigns.estimate import campaign_estimate
from campaigns.models import Campaign
from campaigns.pacing import local_slots_plan
from notify.models import Outbox
from tests.campaigns.conftest import fan_out_all, launch, seed_recipients

pytestmark = pytest.mark.django_db

TEN = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)


def test_moments_take_turns_in_time_order_so_the_campaign_keeps_its_rate():
    later = TEN + timedelta(seconds=30)  # while the 10:00 people still take their turns
    much_later = TEN + timedelta(hours=1)
    plan = local_slots_plan(moments={much_later: 5, later: 10, TEN: 1000}, rate=20)
    assert plan == {
        TEN.isoformat(): [TEN.isoformat(), 0],
        # 1,000 turns at 20 a second end 50 s after 10:00: the next moment waits for them.
        later.isoformat(): [(TEN + timedelta(seconds=50)).isoformat(), 0],
        much_later.isoformat(): [much_later.isoformat(), 0],
    }


def due_times(campaign: Campaign) -> list[datetime]:
    return sorted(
        Outbox.objects.filter(
            notification__event_id__startswith=campaign.event_id_prefix
        ).values_list("due_at", flat=True)
    )


def test_a_thousand_people_at_one_ten_oclock_are_spaced_at_the_rate_from_it(promo_data, settings):
    settings.NOTIFY_CAMPAIGN_TIME_SCALE = 1
    seed_recipients(1000, prefix="paris", timezone="Europe/Paris")
    campaign = launch()
    Campaign.objects.filter(pk=campaign.pk).update(local_time=time(10, 0), send_rate=20)
    started = timezone.now()
    fan_out_all(campaign, batch_size=300)  # four batches: the turns run on across them
    dues = due_times(campaign)
    assert len(dues) == 1000
    first = dues[0].astimezone(ZoneInfo("Europe/Paris"))
    assert first.time() == time(10, 0)  # the first at their 10:00 ...
    assert started <= dues[0] < started + timedelta(hours=24)
    steps = {round((b - a).total_seconds(), 3) for a, b in pairwise(dues)}
    assert steps == {0.05}  # ... then one every twentieth of a second
    assert dues[-1] - dues[0] == timedelta(seconds=999 / 20)  # about 50 s in all
    # Every notification's send_at is its due time (its deadlines count from it).
    rows = Outbox.objects.filter(notification__event_id__startswith=campaign.event_id_prefix)
    assert all(o.due_at == o.notification.send_at for o in rows.select_related("notification"))

    # The estimate times the same schedule: until their 10:00, then 50 s of turns.
    probe = Campaign(
        category=campaign.category,
        audience_kind="all",
        local_time=time(10, 0),
        send_rate=20,
    )
    estimate = campaign_estimate(campaign=probe, now=campaign.paced_from)
    real = (dues[-1] - campaign.paced_from).total_seconds()
    assert estimate.duration_seconds == pytest.approx(real, abs=1)


def test_without_a_rate_people_who_share_a_moment_go_at_it_together(promo_data, settings):
    settings.NOTIFY_CAMPAIGN_TIME_SCALE = 1
    seed_recipients(50, prefix="paris", timezone="Europe/Paris")
    campaign = launch()
    Campaign.objects.filter(pk=campaign.pk).update(local_time=time(10, 0))
    fan_out_all(campaign, batch_size=20)
    assert len(set(due_times(campaign))) == 1


def test_a_later_zone_waits_for_the_turns_of_an_earlier_one_only_when_they_overlap(
    promo_data, settings
):
    settings.NOTIFY_CAMPAIGN_TIME_SCALE = 1
    seed_recipients(40, prefix="paris", timezone="Europe/Paris")  # the hour here, and
    seed_recipients(40, prefix="london", timezone="Europe/London")  # an hour later here
    campaign = launch()
    # An hour still ahead in both zones today (a fixed 10:00 had passed in Paris but not
    # in London between 09:00 and 10:00 UTC, and Paris's came a day later).
    paris_now = timezone.now().astimezone(ZoneInfo("Europe/Paris"))
    hour = time((paris_now.hour + 2) % 24, 0)
    Campaign.objects.filter(pk=campaign.pk).update(local_time=hour, send_rate=2)
    fan_out_all(campaign, batch_size=25)
    dues = due_times(campaign)
    paris, london = dues[:40], dues[40:]
    # 40 turns at 2 a second take 20 s, far less than the hour between the zones.
    assert london[0] - paris[0] == timedelta(hours=1)
    assert {round((b - a).total_seconds(), 3) for a, b in pairwise(paris)} == {0.5}
    assert {round((b - a).total_seconds(), 3) for a, b in pairwise(london)} == {0.5}
