"""Analytics on the real processes: workers write the events, the `analytics` process
ships them and answers the reports; killed with SIGKILL mid-shipping, it loses and
doubles nothing."""

from __future__ import annotations

import os
import signal
import time

import pytest
from django.db import connection
from django.db.models import Count
from django.test import Client

from analytics.models import AnalyticsEvent
from analytics.store.schema import EVENTS
from campaigns.models import Campaign
from deliveries.models import Delivery
from tests.analytics.conftest import store_rows
from tests.campaigns.conftest import campaign_body, campaign_notifications, seed_recipients
from tests.deliveries.email.test_esp_email import post_event
from tests.peers import postmark
from tests.waiting import wait_for

pytestmark = pytest.mark.e2e

REFUSED = 20
WITHOUT_CONSENT = 50
CONSENTING = 250
OPENED = 10
HOOK_SECRET = "postmark-hooks:analytics-e2e"


def test_a_campaign_report_matches_what_happened_within_30_seconds_of_the_last_send(
    api, promo_data, pipeline, workers_with, analytics_process, settings
):
    smtp = pipeline
    workers_with(NOTIFY_ANALYTICS_ENABLED="true", pool="threads", concurrency=8)
    seed_recipients(CONSENTING, prefix="yes")
    seed_recipients(WITHOUT_CONSENT, prefix="no", consent=False)
    for number in range(REFUSED):
        smtp.handler.rcpt_by_address[f"yes-{number:05d}@example.com"] = "550 5.1.1 No such user"

    people = [f"yes-{n:05d}" for n in range(CONSENTING)]
    people += [f"no-{n:05d}" for n in range(WITHOUT_CONSENT)]
    audience = {"user_ids": people}
    response = api.post("/v1/campaigns", campaign_body(audience=audience), format="json")
    assert response.status_code == 202, response.content
    campaign = Campaign.objects.get(pk=response.json()["campaign_id"])

    def all_ended():
        """The email deliveries by (status, reason), once all 300 ended."""
        rows = (
            Delivery.objects.filter(
                notification__in=campaign_notifications(campaign), channel="email"
            )
            .values_list("status", "reason")
            .annotate(n=Count("id"))
        )
        counts = {(status, reason): n for status, reason, n in rows}
        ended = {"delivered", "failed", "dead", "suppressed"}
        done = sum(n for (status, _), n in counts.items() if status in ended) == 300
        return counts if done else None

    truth = wait_for(all_ended, timeout=90, what="every member's email ended")
    last_send = time.monotonic()
    # Ten people open the email: the provider's tracking webhook says so.
    settings.ANYMAIL = {**settings.ANYMAIL, "WEBHOOK_SECRET": [HOOK_SECRET]}
    opened = Delivery.objects.filter(
        notification__in=campaign_notifications(campaign), channel="email", status="delivered"
    )[:OPENED]
    for delivery in opened:
        body = postmark.open_event(delivery.provider_message_id, delivery.target)
        assert post_event(Client(), body, auth=HOOK_SECRET).status_code == 200

    def report_matches():
        document = api.get(f"/v1/campaigns/{campaign.pk}/report").json()
        email = document["channels"].get("email", {})
        seen = (email.get("audience"), email.get("failed"), email.get("delivered"))
        done = seen == (300, REFUSED, CONSENTING - REFUSED) and email["opened"] == OPENED
        return document if done else None

    document = wait_for(report_matches, timeout=30, what="the report to catch up")
    assert time.monotonic() - last_send < 30
    email = document["channels"]["email"]
    # The report and PostgreSQL's progress agree, reason by reason.
    assert email["suppressed_by_reason"] == {
        reason: n for (status, reason), n in truth.items() if status == "suppressed"
    }
    assert sum(email["suppressed_by_reason"].values()) == WITHOUT_CONSENT
    assert email["delivered"] == truth[("delivered", "")]
    assert email["failed"] == sum(n for (s, _), n in truth.items() if s in ("failed", "dead"))
    assert email["sent"] == CONSENTING  # one try each: a 550 is final
    assert (email["opened"], email["bounced"], email["digested"]) == (OPENED, 0, 0)
    assert document["lag_seconds"] < 30


def _queue_raw(count: int) -> None:
    """`count` events in the queue in one statement (as many rounds would leave them)."""
    table = AnalyticsEvent._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {table} (kind, occurred_at, producer_id, category, channel, provider,"
            " reason, person) SELECT 'delivered', now(), 1, 'promo.weekly', 'email', 'smtp',"
            " '', md5(i::text)::char(32) FROM generate_series(1, %s) AS i",
            [count],
        )


def _queued() -> int:
    return AnalyticsEvent.objects.count()


def test_a_shipper_killed_mid_shipping_loses_and_doubles_no_event(
    transactional_db, analytics_process
):
    # The exact moment between a batch's insert and its commit is shown in
    # test_shipping.py; here the real process dies at three points of a long drain.
    total = 150_000
    _queue_raw(total)
    analytics_process.stop()
    analytics_process.env["NOTIFY_ANALYTICS_BATCH"] = "5000"
    for _ in range(3):
        analytics_process.start()
        before = _queued()
        wait_for(lambda b=before: _queued() < b - 7_500, timeout=60, what="shipping under way")
        os.kill(analytics_process.process.pid, signal.SIGKILL)
        analytics_process.process.wait()
    assert _queued() > 0
    analytics_process.start()
    wait_for(lambda: _queued() == 0, timeout=120, what="the queue drained")
    # Each queued `delivered` is two events in the store (with its try's `sent`).
    shipped = 2 * total
    assert store_rows(f"SELECT count(), uniqExact(event_id) FROM {EVENTS}") == [(shipped, shipped)]
