"""The estimate reports what routing decides after the gate, not only the gate's verdict:
a category that digests or delays a channel (a campaign is never gathered nor delayed, so
its messages go), quiet hours that outlast a message's deadline (it ends `expired`), and
an unpaced audience larger than the provider's campaign share carries in a deadline."""

from __future__ import annotations

from collections import Counter
from datetime import timedelta

import pytest
from django.utils import timezone

from campaigns.estimate import campaign_estimate
from campaigns.models import Campaign
from campaigns.pacing import provider_low_share
from deliveries.models import Delivery
from deliveries.pipeline.release import deferred_release
from deliveries.pipeline.routing import notifications_route
from notify.models import Category, QueueClass
from preferences.models import QuietHours
from tests.campaigns.conftest import (
    PROMO,
    campaign_notifications,
    fan_out_all,
    launch,
    seed_recipients,
)

pytestmark = pytest.mark.django_db


def email_category(key: str, **fields) -> Category:
    """A marketing category on email alone (with the promo's payload schema)."""
    promo = Category.objects.get(key="promo.weekly")
    return Category.objects.create(
        key=key,
        queue=QueueClass.LOW,
        marketing=True,
        default_channels=["email"],
        payload_schema=promo.payload_schema,
        **fields,
    )


def estimated(estimate) -> Counter:
    """(outcome) → count of the email channel, as the estimate says."""
    [email] = estimate.channels
    counts = Counter(
        send=email.send,
        deferred=email.deferred,
        digested=email.digested,
        delayed=email.delayed,
        expired=email.expired,
        **email.suppressed,
    )
    return +counts


def routed(campaign: Campaign) -> Counter:
    """The same, of the deliveries the campaign made."""
    rows = Delivery.objects.filter(
        notification__event_id__startswith=campaign.event_id_prefix
    ).values_list("status", "reason")
    names = {"queued": "send", "digesting": "digested", "expired": "expired"}
    return Counter(
        reason
        if status == "suppressed"
        else "delayed"
        if reason == "delayed_if_unread"
        else names.get(status, status)
        for status, reason in rows
    )


def route_now(campaign: Campaign, now) -> None:
    fan_out_all(campaign)
    ids = list(campaign_notifications(campaign).values_list("pk", flat=True))
    notifications_route(notification_ids=ids, now=now)


@pytest.mark.parametrize(
    "timing", [{"digest_windows": {"email": 600}}, {"delays_if_unread": {"email": 300}}]
)
def test_a_digesting_or_delaying_category_is_estimated_as_routing_then_decides(promo_data, timing):
    seed_recipients(6, prefix="ok")
    seed_recipients(2, prefix="nocons", consent=False)
    category = email_category("promo.gather", **timing)
    now = timezone.now()
    probe = Campaign(category=category, payload=PROMO, audience_kind="all")
    estimate = campaign_estimate(campaign=probe, now=now)
    campaign = launch("promo.gather")
    route_now(campaign, now)
    # A campaign is one message to many people: routing neither digests nor delays it,
    # and the estimate asks routing's own rule, so it says so.
    assert estimated(estimate) == routed(campaign) == Counter(send=6)
    assert estimate.channels[0].digested == estimate.channels[0].delayed == 0


def test_quiet_hours_that_outlast_the_deadline_are_estimated_expired_and_end_so(promo_data):
    now = timezone.now()
    seed_recipients(5, prefix="ok")
    quiet = seed_recipients(3, prefix="quiet")
    # Quiet from an hour ago until three hours on; the category's messages last an hour.
    QuietHours.objects.filter(recipient__in=quiet).update(
        start=(now - timedelta(hours=1)).time(), end=(now + timedelta(hours=3)).time()
    )
    category = email_category("promo.brief", ttl_seconds=3600)
    probe = Campaign(category=category, payload=PROMO, audience_kind="all")
    estimate = campaign_estimate(campaign=probe, now=now)
    assert estimated(estimate) == Counter(send=5, expired=3)
    assert estimate.channels[0].expired_examples == [r.user_id for r in quiet]

    campaign = launch("promo.brief")
    route_now(campaign, now)
    assert routed(campaign) == Counter(send=5, deferred=3)  # for now ...
    deferred_release(now=now + timedelta(hours=3, minutes=1))
    assert routed(campaign) == estimated(estimate)  # ... then past their deadline


def test_an_unpaced_audience_beyond_what_the_share_carries_in_a_deadline_expires_its_tail(
    promo_data, settings
):
    settings.NOTIFY_PROVIDER_RATE_LIMITS = {
        **settings.NOTIFY_PROVIDER_RATE_LIMITS,
        "smtp": "1:1",
        "postmark": "1:1",
    }
    settings.NOTIFY_LOW_PRIORITY_RESERVE = 0
    seed_recipients(100, prefix="tail")
    category = email_category("promo.minute", ttl_seconds=60)
    assert provider_low_share(channel="email") == 1
    probe = Campaign(category=category, payload=PROMO, audience_kind="all")
    estimate = campaign_estimate(campaign=probe, now=timezone.now())
    # One a second, each worth sending for a minute from the start: the first 60 go.
    assert estimated(estimate) == Counter(send=60, expired=40)
    assert estimate.channels[0].expired_examples == [f"tail-{i:05d}" for i in range(60, 70)]
    # Paced at the share, each message's minute counts from its own release: none expires.
    probe.send_rate = 1
    assert estimated(campaign_estimate(campaign=probe, now=timezone.now())) == Counter(send=100)
