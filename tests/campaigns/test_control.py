"""Pause, resume and cancel: nothing is dropped, nothing goes out while paused, and
every audience member is counted under exactly one status at every step."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from campaigns import control, fanout
from campaigns.control import CampaignStateError, campaign_cancel, campaign_pause, campaign_resume
from campaigns.fanout import campaign_fan_out
from campaigns.models import CampaignHold, CampaignStatus
from campaigns.selectors import MEMBER_ORDER, campaign_progress
from deliveries.models import Delivery, DeliveryStatus
from deliveries.pipeline.release import deferred_release
from deliveries.pipeline.routing import notification_route
from notify.models import Notification, Outbox
from notify.outbox_wake import wake_listener
from tests.campaigns.conftest import (
    NOON_UTC,
    campaign_notifications,
    email_only_category,
    launch,
    seed_recipients,
)

pytestmark = pytest.mark.django_db

THREE_AM_UTC = datetime(2026, 1, 10, 3, 0, tzinfo=UTC)


def statuses(campaign) -> dict[tuple[str, str], int]:
    counts: dict[tuple[str, str], int] = {}
    for status, reason in Delivery.objects.filter(
        notification__in=campaign_notifications(campaign)
    ).values_list("status", "reason"):
        counts[(status, reason)] = counts.get((status, reason), 0) + 1
    return counts


def members(campaign) -> dict[str, int]:
    campaign.refresh_from_db()
    progress = campaign_progress(campaign)
    assert sum(progress.members.values()) == progress.audience_size == 50
    return progress.members


def route(notifications, now: datetime) -> None:
    for notification_id in notifications.values_list("pk", flat=True):
        notification_route(notification_id=notification_id, now=now)


def test_pause_resume_and_cancel_keep_every_member_counted_once(
    promo_data, django_capture_on_commit_callbacks, monkeypatch
):
    email_only_category()
    seed_recipients(5, prefix="q", quiet=True)  # default quiet window: 21:00-09:00 UTC
    seed_recipients(45, prefix="n")
    campaign = launch("promo.mail")
    campaign_fan_out(campaign_id=campaign.pk, batch_size=20)
    campaign_fan_out(campaign_id=campaign.pk, batch_size=20)
    created = campaign_notifications(campaign).order_by("recipient_id")
    route(created[:30], THREE_AM_UTC)
    assert members(campaign) == {"deferred": 5, "queued": 25, "not_routed": 10, "not_created": 10}

    # Pause: the fan-out stops, routes not yet run are held, unsent deliveries are held.
    assert campaign_pause(campaign_id=campaign.pk) == 40
    assert statuses(campaign) == {("deferred", "campaign_paused"): 30}
    assert not Delivery.objects.filter(reason="campaign_paused", next_attempt_at__isnull=False)
    assert campaign_fan_out(campaign_id=campaign.pk, batch_size=20).more is False
    route(created[30:], NOON_UTC)  # route messages still in the queue: no-ops now
    assert deferred_release(now=NOON_UTC + timedelta(days=1)) == 0
    assert statuses(campaign) == {("deferred", "campaign_paused"): 30}
    assert members(campaign) == {"deferred": 30, "not_routed": 10, "not_created": 10}
    with pytest.raises(CampaignStateError):
        campaign_pause(campaign_id=campaign.pk)

    # Resume: everything comes back as it was; queued ones are enqueued after commit, held
    # routes are published again by the relay, and the fan-out goes on.
    enqueued, published = [], []
    monkeypatch.setattr(control, "delivery_enqueue", lambda **kw: enqueued.append(kw))
    monkeypatch.setattr(fanout, "_fan_out_publish", lambda *args: published.append(args))
    with django_capture_on_commit_callbacks(execute=True):
        assert campaign_resume(campaign_id=campaign.pk) == 40
    assert statuses(campaign) == {("queued", ""): 25, ("deferred", "quiet_hours"): 5}
    assert len(enqueued) == 25 and {kw["queue"] for kw in enqueued} == {"low"}
    assert published == [(campaign.pk, campaign.checkpoint)]
    assert set(
        Delivery.objects.filter(reason="quiet_hours").values_list("next_attempt_at", flat=True)
    ) == {THREE_AM_UTC.replace(hour=9)}
    held = Notification.objects.filter(pk__in=list(created[30:].values_list("pk", flat=True)))
    assert not held.filter(routed_at__isnull=False).exists()
    assert Outbox.objects.filter(notification__in=held, published_at__isnull=True).count() == 10
    assert not CampaignHold.objects.exists()
    campaign.refresh_from_db()
    assert campaign.status == CampaignStatus.RUNNING

    route(held, NOON_UTC)
    campaign_fan_out(campaign_id=campaign.pk, batch_size=20)
    assert members(campaign) == {"deferred": 5, "queued": 35, "not_routed": 10}

    # Cancel: whatever is not final and not in a sender's hands ends cancelled.
    first, second = Delivery.objects.filter(status="queued").order_by("pk")[:2]
    Delivery.objects.filter(pk=first.pk).update(status="delivered")
    Delivery.objects.filter(pk=second.pk).update(status="sending")
    assert campaign_cancel(campaign_id=campaign.pk) == 38
    assert statuses(campaign) == {
        ("cancelled", "campaign_cancelled"): 38,
        ("delivered", ""): 1,
        ("sending", ""): 1,
    }
    assert members(campaign) == {"cancelled": 48, "delivered": 1, "sending": 1}
    assert campaign_fan_out(campaign_id=campaign.pk, batch_size=20).more is False
    route(campaign_notifications(campaign), NOON_UTC)  # late route messages: nothing new
    assert Delivery.objects.filter(notification__in=campaign_notifications(campaign)).count() == 40
    with pytest.raises(CampaignStateError):
        campaign_resume(campaign_id=campaign.pk)


@pytest.mark.django_db(transaction=True)
def test_resuming_wakes_the_relays_for_the_routes_it_gives_back(
    promo_data, session_worker_paused, monkeypatch
):
    # Real commits: the relays hear PostgreSQL's NOTIFY only once the resume commits.
    monkeypatch.setattr(fanout, "_fan_out_publish", lambda *args: None)
    email_only_category()
    seed_recipients(3, prefix="wake")
    campaign = launch("promo.mail")
    campaign_fan_out(campaign_id=campaign.pk, batch_size=20)
    assert campaign_pause(campaign_id=campaign.pk) == 3  # three routes held
    with wake_listener() as listener:
        assert campaign_resume(campaign_id=campaign.pk) == 3
        assert len(list(listener.notifies(timeout=5, stop_after=1))) == 1


def test_a_scheduled_campaign_waits_for_its_send_at(promo_data, monkeypatch):
    from django.utils import timezone

    from campaigns.fanout import campaigns_start_due

    published = []
    monkeypatch.setattr(fanout, "fan_out_publish_on_commit", lambda **kw: published.append(kw))
    seed_recipients(3)
    send_at = timezone.now() + timedelta(hours=1)
    campaign = launch(send_at=send_at)
    assert campaign.status == CampaignStatus.SCHEDULED
    assert campaigns_start_due(now=send_at - timedelta(seconds=1)) == []
    assert campaign_fan_out(campaign_id=campaign.pk).more is False  # not started yet
    assert campaigns_start_due(now=send_at) == [campaign.pk]
    campaign.refresh_from_db()
    assert campaign.status == CampaignStatus.RUNNING
    assert published == [{"campaign_id": campaign.pk, "checkpoint": 0}]


def test_a_fan_out_that_made_no_batch_for_a_while_is_published_again(
    promo_data, monkeypatch, settings
):
    from django.utils import timezone

    from campaigns.fanout import campaigns_start_due

    published = []
    monkeypatch.setattr(fanout, "fan_out_publish_on_commit", lambda **kw: published.append(kw))
    seed_recipients(30)
    campaign = launch()
    campaign_fan_out(campaign_id=campaign.pk, batch_size=10)
    campaign.refresh_from_db()
    later = timezone.now() + timedelta(seconds=settings.NOTIFY_CAMPAIGN_STALL_SECONDS + 1)
    assert campaigns_start_due(now=timezone.now()) == []
    assert campaigns_start_due(now=later) == [campaign.pk]
    assert published[-1] == {"campaign_id": campaign.pk, "checkpoint": campaign.checkpoint}


def test_a_campaign_paused_before_its_send_at_resumes_scheduled(promo_data, monkeypatch):
    from django.utils import timezone

    published = []
    monkeypatch.setattr(fanout, "fan_out_publish_on_commit", lambda **kw: published.append(kw))
    campaign = launch(send_at=timezone.now() + timedelta(hours=1))
    campaign_pause(campaign_id=campaign.pk)
    campaign_resume(campaign_id=campaign.pk)
    campaign.refresh_from_db()
    assert campaign.status == CampaignStatus.SCHEDULED
    assert published == []


def test_every_delivery_status_has_its_place_in_a_campaigns_progress():
    # A status missing here would count its members as "not routed".
    assert set(MEMBER_ORDER) == set(DeliveryStatus)
