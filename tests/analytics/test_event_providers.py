"""An event names the provider that did it: with email failing over from Postmark to SMTP
(`NOTIFY_EMAIL_PROVIDERS=postmark,smtp`) on real workers, the `delivered` event of a
delivery handed over (which stands for its try's `sent` too) names SMTP, not the
channel's primary."""

from __future__ import annotations

import pytest

from analytics.models import AnalyticsEvent
from tests.deliveries.email.test_esp_e2e import notify
from tests.deliveries.email.test_failover_e2e import ORDER, delivered, providers_of
from tests.peers import postmark

pytestmark = pytest.mark.e2e


def _named(delivery) -> list[tuple[str, str]]:
    """The delivery's queued `sent` and `delivered` events as (kind, provider)."""
    events = AnalyticsEvent.objects.filter(delivery_id=delivery.pk, kind__in=["sent", "delivered"])
    return sorted(events.values_list("kind", "provider"))


def test_the_events_of_a_delivery_handed_over_name_the_provider_that_sent_it(
    api, pat, postmark_peer, pipeline, workers_with, smtp, analytics_on
):
    postmark_peer.reset()
    workers_with(
        NOTIFY_ANALYTICS_ENABLED="true",
        NOTIFY_EMAIL_PROVIDERS="postmark,smtp",
        POSTMARK_SERVER_TOKEN=postmark.TOKEN,
        POSTMARK_API_URL=postmark_peer.url,
        NOTIFY_BREAKER_FAILURES="3",
    )
    first = delivered(notify(api, "order.shipped", ORDER))
    assert providers_of(first) == [("postmark", "delivered")]
    assert _named(first) == [("delivered", "postmark")]

    postmark_peer.down = (503, {"ErrorCode": 0, "Message": "Service unavailable"}, {})
    moved = [delivered(notify(api, "order.shipped", ORDER)) for _ in range(4)]
    for delivery in moved:
        assert providers_of(delivery)[-1] == ("smtp", "delivered")
        assert _named(delivery) == [("delivered", "smtp")]
    # The first ones were handed over within their round (a try at Postmark first); once
    # the breaker opened, the others went to SMTP straight away: both name SMTP.
    assert providers_of(moved[0])[0] == ("postmark", "transient")
    postmark_peer.reset()
