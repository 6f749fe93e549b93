"""What providers report after the send becomes events: reached (with its latency from
the hand-over), a hard bounce, a spam complaint (and the unsubscribe it makes), an open
and a click; an SMSC's receipt too. A replayed report counts once."""

from __future__ import annotations

from collections import Counter

import pytest

from analytics.events import person_hash
from analytics.models import AnalyticsEvent
from deliveries.channels.sms.smpp.receipts import Receipt, receipt_apply
from deliveries.models import DeliveryStatus, ProviderEventKind
from deliveries.pipeline.provider_events import Applied, ProviderNews, provider_event_apply
from tests.deliveries.ops.test_delivery_latency import finished


def _news(kind: ProviderEventKind, key: str, message_id: str, **fields) -> ProviderNews:
    return ProviderNews(esp="postmark", key=key, kind=kind, message_id=message_id, **fields)


def _kinds() -> Counter:
    return Counter(AnalyticsEvent.objects.values_list("kind", flat=True))


@pytest.mark.usefixtures("analytics_on")
def test_provider_reports_become_events_once(ann):
    reached = finished(ann, "email", DeliveryStatus.DELIVERED, seconds=2, message_id="m-1")
    bounced = finished(ann, "email", DeliveryStatus.DELIVERED, seconds=2, message_id="m-2")
    finished(ann, "sms", DeliveryStatus.DELIVERED, seconds=1, message_id="smsc-9")

    delivered = _news(ProviderEventKind.DELIVERED, "e1", "m-1")
    assert provider_event_apply(news=delivered) == Applied.RECORDED
    assert provider_event_apply(news=delivered) == Applied.REPLAY
    for key, kind in (("e2", ProviderEventKind.OPENED), ("e3", ProviderEventKind.CLICKED)):
        assert provider_event_apply(news=_news(kind, key, "m-1")) == Applied.RECORDED
    provider_event_apply(news=_news(ProviderEventKind.COMPLAINED, "e4", "m-1"))
    provider_event_apply(news=_news(ProviderEventKind.BOUNCED, "e5", "m-2", hard=True))
    assert receipt_apply(receipt=Receipt("smsc-9", "DELIVRD", "000", "stat:DELIVRD")) == 1

    assert _kinds() == {
        "reached": 2,  # the email and the SMS
        "opened": 1,
        "clicked": 1,
        "complained": 1,
        "unsubscribed": 1,  # the complaint withdrew all marketing by email
        "bounced": 1,
    }
    event = AnalyticsEvent.objects.get(kind="reached", delivery_id=reached.pk)
    # From the hand-over (finished_at: 58 s ago) to the report (now).
    assert 55_000 <= event.latency_ms <= 70_000
    assert event.person == person_hash(ann[2].user_id)
    assert AnalyticsEvent.objects.get(kind="bounced").delivery_id == bounced.pk
    assert AnalyticsEvent.objects.get(kind="bounced").reason == "bounced"
    withdrawn = AnalyticsEvent.objects.get(kind="unsubscribed")
    assert (withdrawn.delivery_id, withdrawn.reason) == (reached.pk, "spam_complaint")
    assert (withdrawn.category, withdrawn.channel) == ("", "email")  # all marketing
