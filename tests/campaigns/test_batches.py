"""A campaign's work goes in batches: the relay hands a route task many notifications, the
route hands each channel's sender one message for many deliveries, and each batch costs a
few statements whatever its size. Every rule still holds per recipient inside a batch.

These tests run the pipeline's steps in this process, against the real PostgreSQL,
RabbitMQ (the messages are read back from the queue) and the SMTP peer, so every
statement and every message is counted.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from datetime import datetime, timedelta

import pytest
from django.conf import settings as django_settings
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from deliveries.channels.email import kept_session_close
from deliveries.models import Delivery, DeliveryAttempt
from deliveries.pipeline.attempt import deliveries_attempt
from deliveries.pipeline.enqueue import ROUTE_TASK
from deliveries.pipeline.routing import notifications_route
from notify.models import Outbox
from notify.relay import outbox_publish_pending
from preferences.models import QuietHours
from tests.campaigns.conftest import campaign_notifications, fan_out_all, launch, seed_recipients
from tests.conftest import messages_taken
from tests.waiting import wait_for

SEND_TASK = "deliveries.send"


def published_routes(campaign) -> list[tuple[str, list, dict]]:
    """Let the campaign's outbox rows go out as a relay would (this process's, or the
    suite's relay process if it runs), then take every message that reached `low`."""
    ids = campaign_notifications(campaign).values_list("pk", flat=True)
    unpublished = Outbox.objects.filter(notification_id__in=ids, published_at__isnull=True)
    while unpublished.exists():
        outbox_publish_pending(queues=("low",))
    return messages_taken("low")


@pytest.fixture
def smtp_here(smtp, settings):
    """This process sends email to the SMTP peer, on a session it closes after."""
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST, settings.EMAIL_PORT = "127.0.0.1", smtp.port
    yield smtp
    kept_session_close()


@pytest.fixture
def quiet_queues(transactional_db, broker, session_worker_paused, clean_breakers):
    """No worker takes from the queues, which start empty: every message is read here."""
    messages_taken("low")
    yield
    messages_taken("low")


def promo_campaign(audience: int, **seeded):
    """A running marketing campaign (in-app, email; Web Push finds no device) to
    `audience` consenting people, fanned out: its notifications and outbox rows written."""
    seed_recipients(audience, **seeded)
    campaign = launch("promo.weekly")
    fan_out_all(campaign)
    return campaign


def test_a_campaign_costs_few_statements_and_messages_per_notification(
    promo_data, quiet_queues, smtp_here
):
    audience = 400
    seed_recipients(audience)
    campaign = launch("promo.weekly")  # in-app, email and Web Push (no devices here)
    fan_out_all(campaign)

    statements = 0
    with CaptureQueriesContext(connection) as relay:
        routes = published_routes(campaign)
    statements += len(relay.captured_queries)
    route_batches = [args[0] for name, args, _ in routes if name == ROUTE_TASK]
    assert sorted(n for batch in route_batches for n in batch) == sorted(
        str(pk) for pk in campaign_notifications(campaign).values_list("pk", flat=True)
    )
    for batch in route_batches:
        with CaptureQueriesContext(connection) as routing:
            notifications_route(notification_ids=batch)
        statements += len(routing.captured_queries)
    sends = messages_taken("low")
    send_batches = [args[0] for name, args, _ in sends if name == SEND_TASK]
    for batch in send_batches:
        with CaptureQueriesContext(connection) as sending:
            deliveries_attempt(delivery_ids=batch)
        statements += len(sending.captured_queries)

    assert len(smtp_here.received) == audience
    delivered = Delivery.objects.filter(status="delivered").values_list("channel", flat=True)
    assert sorted(set(delivered)) == ["email", "inapp"] and len(delivered) == 2 * audience
    messages = len(routes) + len(sends)
    assert statements / audience <= 1.5, f"{statements} statements for {audience} notifications"
    assert messages / audience <= 0.1, f"{messages} broker messages for {audience} notifications"


def test_a_batch_ends_each_member_with_its_own_status_and_its_own_retry(
    promo_data, quiet_queues, smtp_here
):
    campaign = promo_campaign(200, prefix="b")
    # Two people whose own quiet window is now (in UTC, their zone): deferred, not sent.
    now = timezone.now()
    quiet = [f"b-{n:05d}" for n in (7, 150)]
    QuietHours.objects.filter(recipient__user_id__in=quiet).update(
        start=(now - timedelta(hours=1)).time(), end=(now + timedelta(hours=1)).time()
    )
    busy = {f"b-{n:05d}@example.com" for n in (3, 60, 199)}  # 4xx: tried again later
    gone = {f"b-{n:05d}@example.com" for n in (1, 2, 90, 91, 120)}  # 5xx: refused for good
    answers = {
        **dict.fromkeys(busy, "450 4.2.1 Mailbox busy"),
        **dict.fromkeys(gone, "550 5.1.1 No such user"),
    }
    smtp_here.handler.rcpt_by_address.update(answers)

    for name, args, _ in published_routes(campaign):
        if name == ROUTE_TASK:
            notifications_route(notification_ids=args[0])
    [batch] = [args[0] for name, args, _ in messages_taken("low") if name == SEND_TASK]
    assert len(batch) == 198  # the two in quiet hours have no send
    deliveries_attempt(delivery_ids=batch)

    rows = {d.target: d for d in Delivery.objects.filter(channel="email")}
    statuses = {}
    for row in rows.values():
        statuses[row.status] = statuses.get(row.status, 0) + 1
    assert statuses == {"delivered": 190, "retrying": 3, "failed": 5, "deferred": 2}
    assert {t for t, d in rows.items() if d.status == "retrying"} == busy
    assert {t for t, d in rows.items() if d.status == "failed"} == gone
    assert {rows[f"{u}@example.com"].reason for u in quiet} == {"quiet_hours"}
    # Each retry keeps its own schedule: its own jittered time, its own message.
    retries = [rows[address] for address in sorted(busy)]
    first_delay = django_settings.NOTIFY_EMAIL_RETRY_DELAYS[0]
    jitter = django_settings.NOTIFY_RETRY_JITTER
    for row in retries:
        assert row.attempts == 1 and "450" in row.last_error
        [attempt] = DeliveryAttempt.objects.filter(delivery_id=row.pk)
        # Counted from its own try (the record follows within the batch's round).
        delay = (row.next_attempt_at - attempt.started_at).total_seconds()
        assert first_delay * (1 - jitter) <= delay <= first_delay * (1 + jitter) + 1
    assert len({row.next_attempt_at for row in retries}) == 3
    retried = wait_for(
        lambda: [m for m in messages_taken("low") if m[0] == SEND_TASK] or None,
        what="the retries' messages",
    )
    assert sorted(args[0] for _, args, _ in retried) == sorted(row.pk for row in retries)
    assert len(smtp_here.received) == 190


def test_a_pause_during_a_send_batch_stops_the_rest_of_it(promo_data, quiet_queues, smtp_here):
    from campaigns.control import campaign_pause

    campaign = promo_campaign(60, prefix="p")
    for name, args, _ in published_routes(campaign):
        if name == ROUTE_TASK:
            notifications_route(notification_ids=args[0])
    [batch] = [args[0] for name, args, _ in messages_taken("low") if name == SEND_TASK]
    smtp_here.handler.data_delay = 0.05  # a relay that takes its time: the batch lasts ~3 s

    def pause_after_ten() -> None:
        wait_for(lambda: len(smtp_here.received) >= 10, what="ten emails sent")
        campaign_pause(campaign_id=campaign.pk)
        paused_at.append(datetime.now().astimezone())

    paused_at: list[datetime] = []
    pauser = threading.Thread(target=lambda: (pause_after_ten(), connection.close()))
    pauser.start()
    deliveries_attempt(delivery_ids=batch)
    pauser.join()

    sent = len(smtp_here.received)
    late = [m for m in smtp_here.received if m.received_at > paused_at[0].timestamp() + 1.0]
    assert late == [], "emails went out more than a second after the pause"
    assert 10 <= sent < 60
    emails = Delivery.objects.filter(channel="email")
    held = emails.filter(status="deferred", reason="campaign_paused").count()
    delivered = emails.filter(status="delivered").count()
    assert (delivered, held) == (sent, 60 - sent)


class _Killed(BaseException):
    """The worker dies here: nothing after this point of the batch runs."""


def test_a_worker_lost_before_a_round_is_recorded_sends_none_of_its_sent_members_again(
    promo_data, quiet_queues, smtp_here, settings, monkeypatch
):
    # A worker dies after the relay took every member of its first round and before the
    # round's record: each of them, the last one too, must end delivered, not sent again.
    import deliveries.pipeline.attempt as attempt
    from deliveries.pipeline.sweep import sweep_due_deliveries

    campaign = promo_campaign(6, prefix="k")
    for name, args, _ in published_routes(campaign):
        if name == ROUTE_TASK:
            notifications_route(notification_ids=args[0])
    [batch] = [args[0] for name, args, _ in messages_taken("low") if name == SEND_TASK]
    settings.NOTIFY_BATCH_ROUND_START = 3

    def killed(tries):
        raise _Killed

    monkeypatch.setattr(attempt, "attempts_record", killed)
    with pytest.raises(_Killed):
        deliveries_attempt(delivery_ids=batch)
    assert len(smtp_here.received) == 3  # the first round went out, none of it recorded
    monkeypatch.undo()

    # The batch's message comes back: what was never claimed goes now. The sweeper then
    # settles the lost worker's claims (as soon as they count as stale here).
    deliveries_attempt(delivery_ids=batch)
    settings.NOTIFY_SEND_CLAIM_TIMEOUT = 0.01
    settings.NOTIFY_RETRY_SWEEP_GRACE = 0
    time.sleep(0.05)
    sweep_due_deliveries()
    for name, args, _ in messages_taken("low"):  # whatever the sweeper sent again
        if name == SEND_TASK:  # a retry's message names one delivery
            ids = args[0]
            deliveries_attempt(delivery_ids=ids if isinstance(ids, list) else [ids])

    emailed = Counter(address for mail in smtp_here.received for address in mail.rcpt_tos)
    assert len(emailed) == 6
    assert set(emailed.values()) == {1}, emailed.most_common(3)
    statuses = set(Delivery.objects.filter(channel="email").values_list("status", flat=True))
    assert statuses == {"delivered"}
