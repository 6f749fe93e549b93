"""The fan-out: set-based batches, one notification per audience member, resumable from
its checkpoint without duplicates. The service is called here as the task would."""

from __future__ import annotations

import pytest
from django.db import connection, transaction

from campaigns.audience import list_matched_as_set
from campaigns.fanout import campaign_fan_out
from campaigns.models import CampaignStatus
from notify.models import Outbox
from notify.services import request_fingerprint
from tests.campaigns.conftest import (
    PROMO,
    campaign_notifications,
    fan_out_all,
    launch,
    seed_recipients,
)

pytestmark = pytest.mark.django_db


def test_3000_recipients_get_one_notification_each_in_batches(promo_data, settings):
    settings.NOTIFY_CAMPAIGN_BATCH_SIZE = 1000
    recipients = seed_recipients(3000)
    campaign = launch()
    assert campaign.status == CampaignStatus.RUNNING

    assert fan_out_all(campaign) == 4  # three full batches, then one that finds the end

    notifications = campaign_notifications(campaign)
    assert notifications.count() == 3000
    assert notifications.values("recipient").distinct().count() == 3000
    assert set(notifications.values_list("event_id", flat=True)) == {
        f"campaign:{campaign.pk}:{r.user_id}" for r in recipients
    }
    assert Outbox.objects.filter(notification__in=notifications).count() == 3000
    assert (campaign.status, campaign.created_count, campaign.audience_size) == (
        CampaignStatus.DONE,
        3000,
        3000,
    )
    assert campaign.checkpoint == recipients[-1].pk
    sample = notifications.select_related("recipient").first()
    assert sample.payload == PROMO
    assert sample.fingerprint == request_fingerprint(
        user_id=sample.recipient.user_id,
        category="promo.weekly",
        payload=PROMO,
        channels=None,
        ttl_seconds=None,
    )


def test_running_the_fan_out_again_creates_nothing_new(promo_data):
    seed_recipients(300)
    campaign = launch()
    fan_out_all(campaign)
    assert campaign_fan_out(campaign_id=campaign.pk).created == 0  # done: left alone

    # Even forced back to the start, ON CONFLICT keeps every member at one notification.
    type(campaign).objects.filter(pk=campaign.pk).update(
        status=CampaignStatus.RUNNING, checkpoint=0
    )
    step = campaign_fan_out(campaign_id=campaign.pk)
    assert (step.created, step.more) == (0, False)
    assert campaign_notifications(campaign).count() == 300
    assert Outbox.objects.filter(notification__in=campaign_notifications(campaign)).count() == 300


def test_an_interrupted_fan_out_resumes_from_its_checkpoint(promo_data):
    recipients = seed_recipients(250)
    campaign = launch()

    first = campaign_fan_out(campaign_id=campaign.pk, checkpoint=0, batch_size=100)
    assert (first.created, first.checkpoint) == (100, recipients[99].pk)

    # A worker killed mid-batch: its transaction rolls back, nothing of it remains.
    with pytest.raises(RuntimeError), transaction.atomic():
        campaign_fan_out(campaign_id=campaign.pk, checkpoint=first.checkpoint, batch_size=100)
        raise RuntimeError("worker lost")
    campaign.refresh_from_db()
    assert (campaign.checkpoint, campaign.created_count) == (recipients[99].pk, 100)

    # The redelivered message runs the same batch; a stale duplicate of the first does not.
    assert campaign_fan_out(campaign_id=campaign.pk, checkpoint=0, batch_size=100).created == 0
    second = campaign_fan_out(campaign_id=campaign.pk, checkpoint=first.checkpoint, batch_size=100)
    assert second.created == 100
    fan_out_all(campaign, batch_size=100)
    assert campaign.created_count == 250
    assert campaign_notifications(campaign).count() == 250
    assert campaign_notifications(campaign).values("recipient").distinct().count() == 250


def fan_out_messages_on_low(conn) -> list[list]:
    """Take every message off `low` and return the args of the fan-out ones."""
    import json

    channel, found = conn.default_channel, []
    while (message := channel.basic_get(queue="low", no_ack=True)) is not None:
        if message.headers.get("task") == "campaigns.fan_out":
            found.append(json.loads(message.body)[0])
    return found


def test_a_redelivered_message_whose_batch_committed_restarts_the_chain(
    promo_data, broker, session_worker_paused, django_capture_on_commit_callbacks
):
    # A worker killed after its batch committed and before it published the next one:
    # the broker redelivers its message, which finds the checkpoint moved on.
    from tests.conftest import purge_queues

    seed_recipients(50)
    campaign = launch()
    first = campaign_fan_out(campaign_id=campaign.pk, checkpoint=0, batch_size=20)
    purge_queues(broker)  # the next message was never published

    with django_capture_on_commit_callbacks(execute=True):  # a plain duplicate
        campaign_fan_out(campaign_id=campaign.pk, checkpoint=0, batch_size=20)
    assert fan_out_messages_on_low(broker) == []
    with django_capture_on_commit_callbacks(execute=True):
        step = campaign_fan_out(
            campaign_id=campaign.pk, checkpoint=0, batch_size=20, redelivered=True
        )
    assert step.created == 0  # the batch is not made twice
    assert fan_out_messages_on_low(broker) == [[campaign.pk, first.checkpoint]]


def test_a_user_id_list_reaches_the_known_ones_once(promo_data):
    seed_recipients(10)
    ids = ["c-00001", "c-00003", "c-00003", "nobody"]
    campaign = launch(audience_kind="user_ids", spec={"user_ids": ids})
    fan_out_all(campaign)
    users = campaign_notifications(campaign).values_list("recipient__user_id", flat=True)
    assert sorted(users) == ["c-00001", "c-00003"]
    assert campaign.audience_size == 2


def recipient_lookups() -> int:
    """Index scans of the recipients table begun in this transaction so far."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT coalesce(sum(idx_scan), 0) FROM pg_stat_xact_user_tables"
            " WHERE relname = 'notify_recipient'"
        )
        return cursor.fetchone()[0]


def test_a_long_user_id_list_is_not_looked_up_id_by_id_in_every_batch(promo_data):
    # A list as long as the recipients: each batch takes its next recipients in id order
    # and looks each up in the list, instead of probing the recipients once for every
    # listed id (20,000 probes a batch here, 800,000 over the campaign; below about
    # 10,000 recipients PostgreSQL reads them all instead, either way).
    recipients = seed_recipients(20_000, consent=False)
    with connection.cursor() as cursor:  # a long-lived table has its statistics
        cursor.execute("ANALYZE notify_recipient")
    campaign = launch(audience_kind="user_ids", spec={"user_ids": [r.user_id for r in recipients]})
    # Batches of 500: the rule weighs the list against the audience's highest recipient
    # id, which the suite's earlier tests (rolled back, their ids spent) push up. The
    # first batch also counts the audience, once (the list probed once): after it, none.
    assert campaign_fan_out(campaign_id=campaign.pk, batch_size=500).more
    before = recipient_lookups()
    assert fan_out_all(campaign, batch_size=500) == 40
    assert recipient_lookups() - before < 1000
    assert campaign_notifications(campaign).count() == 20_000


@pytest.mark.parametrize(
    ("listed", "until", "as_set"),
    [
        (20_000, 20_000, True),  # the bench's campaign: a list of everyone
        (100_000, 10_000_000, False),  # 5 million probes, or a read of 10 million rows
        (3_000, 10_000_000, False),  # a short list on a large install
        (1_000, 1_000, False),  # one batch: its probes are the list, once
    ],
)
def test_a_list_is_matched_as_a_set_when_probing_it_every_batch_costs_more(listed, until, as_set):
    assert list_matched_as_set(listed=listed, batch=2000, until=until) is as_set


def test_a_segment_selects_by_recipient_fields(promo_data):
    seed_recipients(5, prefix="de", locale="de")
    seed_recipients(5, prefix="ph", locale="de", phone="+4915112345678")
    seed_recipients(5, prefix="en")
    campaign = launch(audience_kind="segment", spec={"locale": ["de"], "has_phone": True})
    fan_out_all(campaign)
    users = set(campaign_notifications(campaign).values_list("recipient__user_id", flat=True))
    assert users == {f"ph-{i:05d}" for i in range(5)}


def test_all_means_everyone_whose_consent_stands(promo_data):
    from preferences.models import ConsentRecord, ConsentSource

    seed_recipients(4, prefix="yes")
    seed_recipients(3, prefix="never", consent=False)
    withdrawn = seed_recipients(2, prefix="gone")
    for recipient in withdrawn:
        ConsentRecord.objects.create(
            recipient=recipient, category=None, granted=False, source=ConsentSource.EMAIL_LINK
        )
    campaign = launch(audience_kind="all")
    fan_out_all(campaign)
    users = set(campaign_notifications(campaign).values_list("recipient__user_id", flat=True))
    assert users == {f"yes-{i:05d}" for i in range(4)}


def test_a_paused_or_cancelled_campaign_stops_fanning_out(promo_data):
    from campaigns.control import campaign_cancel, campaign_pause

    seed_recipients(30)
    campaign = launch()
    campaign_fan_out(campaign_id=campaign.pk, batch_size=10)
    campaign_pause(campaign_id=campaign.pk)
    assert campaign_fan_out(campaign_id=campaign.pk, batch_size=10).more is False
    campaign_cancel(campaign_id=campaign.pk)
    assert campaign_fan_out(campaign_id=campaign.pk, batch_size=10).more is False
    assert campaign_notifications(campaign).count() == 10


@pytest.mark.django_db(transaction=True)
def test_two_campaigns_of_one_category_fan_out_side_by_side(promo_data, monkeypatch):
    """A batch in progress locks its own campaign row only (not the category), so the
    other campaign's fan-out is neither skipped nor kept waiting."""
    import threading

    from django.db import connection

    from campaigns import fanout

    # Commits are real here: no task goes to a worker that may be running this session.
    monkeypatch.setattr(fanout, "_fan_out_publish", lambda *args: None)
    seed_recipients(5)
    first, second = launch(), launch()
    locked, release = threading.Event(), threading.Event()

    def first_batch_held_open() -> None:
        try:
            with transaction.atomic():
                campaign_fan_out(campaign_id=first.pk)
                locked.set()
                release.wait(10)
        finally:
            connection.close()

    holder = threading.Thread(target=first_batch_held_open)
    holder.start()
    try:
        assert locked.wait(10)
        assert campaign_fan_out(campaign_id=second.pk).created == 5
        assert campaign_fan_out(campaign_id=first.pk).created == 0  # busy: left to its chain
    finally:
        release.set()
        holder.join()
    assert campaign_notifications(first).count() == 5
