"""The route and the senders' rounds write their events from what they carry (nothing
read back); every other round reads the deliveries back. Both must say the same: here a
routed and sent batch's carried events are compared with what the read-back statement
writes for the same changes."""

from __future__ import annotations

import uuid
from collections import Counter

from django.db import connection
from django.test import TestCase
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from analytics.events import analytics_events_write, campaign_of
from analytics.models import AnalyticsEvent
from deliveries.changes import RoundChanges
from deliveries.channels.base import SendResult
from deliveries.models import Delivery, Device
from deliveries.pipeline.attempt import deliveries_attempt
from deliveries.pipeline.claim import delivery_load
from deliveries.pipeline.outcome import Tried, attempts_record
from deliveries.pipeline.routing import notifications_route
from notify.models import Category, Notification, Producer, Recipient
from notify.services import notification_accept
from tests.deliveries.pipeline.test_costs import ORDER, one_round
from tests.deliveries.pipeline.test_send_at_route import send_messages

PEOPLE = 6


def _accept(user_id: str, event_id: str, channels: tuple[str, ...] = ("fcm",)) -> uuid.UUID:
    return notification_accept(
        producer=Producer.objects.get_or_create(name="carried")[0],
        event_id=event_id,
        user_id=user_id,
        category=Category.objects.get(key="order.shipped"),
        payload=ORDER,
        channels=list(channels),
        ttl_seconds=None,
    ).notification_id


def _written() -> Counter:
    """The queued events, without what differs by the moment of writing."""
    return Counter(
        AnalyticsEvent.objects.values_list(
            "kind", "reason", "producer_id", "campaign_id", "category", "channel",
            "provider", "delivery_id", "notification_id", "person",
        )
    )  # fmt: skip


def _read_back(ids: list[uuid.UUID]) -> None:
    """The same batch's changes announced as a round that carries nothing."""
    deliveries = Delivery.objects.filter(notification_id__in=ids)
    routed = Notification.objects.filter(pk__in=ids)
    analytics_events_write(
        RoundChanges(
            deliveries=[(d.pk, d.accepted_at, "suppressed") for d in deliveries
                        if d.status == "suppressed"],
            notifications=[(n.pk, n.created_at) for n in routed],
            news=[], reported=False, reported_at=None,
        )
    )  # fmt: skip
    sent = [d for d in deliveries if d.status == "delivered"]
    analytics_events_write(
        RoundChanges(
            deliveries=[(d.pk, d.accepted_at, "delivered") for d in sent],
            notifications=[], news=[], reported=False, reported_at=None,
            providers={d.pk: "fcm" for d in sent},
        )
    )  # fmt: skip


def test_a_rounds_carried_events_say_what_reading_the_deliveries_back_says(
    demo_data, quiet_broker, fcm_peer, clean_breakers, settings, analytics_on
):
    one_round(settings)
    ids = []
    for n in range(PEOPLE):
        recipient = Recipient.objects.create(user_id=f"carried-{n}", locale="en")
        if n % 3:  # every third person has no app: suppressed, with its reason
            Device.objects.create(
                recipient=recipient, kind="fcm", installation_id=f"i-{n}", token=f"t-{n}"
            )
        event_id = f"campaign:{40 + n}:carried-{n}" if n % 2 else str(uuid.uuid4())
        ids.append(_accept(recipient.user_id, event_id))
    with TestCase.captureOnCommitCallbacks(execute=True):
        notifications_route(notification_ids=ids)
    for delivery_ids in send_messages(quiet_broker, "medium"):
        deliveries_attempt(delivery_ids=delivery_ids)

    carried = _written()
    kinds = Counter(kind for kind, *_ in carried.elements())
    assert kinds == {"accepted": PEOPLE, "suppressed": 2, "delivered": 4}
    assert {row[3] for row in carried} == {None, 41, 43, 45}
    assert {row[1] for row in carried if row[0] == "suppressed"} != {""}
    assert AnalyticsEvent.objects.filter(kind="delivered", latency_ms__gte=0).count() == 4

    AnalyticsEvent.objects.all().delete()
    _read_back(ids)
    assert _written() == carried


def test_a_campaigns_event_id_names_its_campaign():
    assert campaign_of("campaign:17:person-3") == 17
    assert campaign_of("campaign:17") == 17
    assert campaign_of("order-17") is None
    assert campaign_of("campaign:estimate:person-3") is None


def test_a_senders_round_writes_events_only_for_the_outcomes_it_wrote(
    demo_data, settings, analytics_on
):
    # Two emails claimed by one round; before it records, the second's claim is taken
    # over (a sweeper gave it to another sender). The round's events ride in its record
    # statement, and only the first outcome is written: so only it counts.
    ids = []
    for n in range(2):
        Recipient.objects.create(user_id=f"ride-{n}", email=f"ride{n}@example.com", locale="en")
        ids.append(_accept(f"ride-{n}", str(uuid.uuid4()), channels=("email",)))
    notifications_route(notification_ids=ids)
    claimed_at = timezone.now()
    emails = list(Delivery.objects.filter(notification_id__in=ids).order_by("notification_id"))
    Delivery.objects.filter(pk__in=[e.pk for e in emails]).update(
        status="sending", claimed_at=claimed_at, attempts=1
    )
    tries = [
        Tried(delivery_load(delivery_id=e.pk).delivery,
              SendResult.delivered(provider_message_id=f"<{e.pk}@x>"), "", claimed_at,
              claimed_at, duration=3)
        for e in emails
    ]  # fmt: skip
    taken_over = emails[1]
    Delivery.objects.filter(pk=taken_over.pk).update(claimed_at=timezone.now())
    AnalyticsEvent.objects.all().delete()  # the route's `accepted` rows

    with CaptureQueriesContext(connection) as queries:
        attempts_record(tries)

    written = Counter(AnalyticsEvent.objects.values_list("delivery_id", "kind"))
    assert written == {(emails[0].pk, "delivered"): 1}
    touching = [q["sql"] for q in queries if AnalyticsEvent._meta.db_table in q["sql"]]
    assert len(touching) == 1 and "WITH attempt AS" in touching[0]  # rode along
    taken_over.refresh_from_db()
    assert taken_over.status == "sending"  # its outcome is the new holder's to write


def test_a_notification_on_two_channels_queues_one_accepted_row_and_two_events(
    demo_data, quiet_broker, store, settings
):
    # The route writes a notification's deliveries' `accepted` two to a row; the store
    # still counts each delivery, under its own event id.
    from analytics.store.schema import EVENTS
    from analytics.store.shipper import batch_ship

    one_round(settings)
    Recipient.objects.create(user_id="pair", email="pair@example.com", locale="en")
    notification_id = _accept("pair", str(uuid.uuid4()), channels=("inapp", "email"))
    with TestCase.captureOnCommitCallbacks(execute=True):
        notifications_route(notification_ids=[notification_id])
    deliveries = dict(
        Delivery.objects.filter(notification_id=notification_id).values_list("channel", "pk")
    )
    assert set(deliveries) == {"inapp", "email"}

    [row] = AnalyticsEvent.objects.filter(kind="accepted")
    assert {row.delivery_id, row.pair_delivery_id} == set(deliveries.values())
    assert {row.channel, row.pair_channel} == {"inapp", "email"}

    batch_ship(store=store)
    accepted = store.query(
        f"SELECT event_id, channel, provider, delivery_id, notification_id, person"
        f" FROM {EVENTS} WHERE kind = 'accepted' ORDER BY event_id"
    )
    providers = settings.NOTIFY_CHANNEL_PROVIDERS
    assert [
        (event_id, channel, provider, pk) for event_id, channel, provider, pk, *_ in accepted
    ] == [
        (row.pk * 2, row.pair_channel, providers.get(row.pair_channel, ""), row.pair_delivery_id),
        (row.pk * 2 + 1, row.channel, providers.get(row.channel, ""), row.delivery_id),
    ]
    assert {(str(n), person) for *_, n, person in accepted} == {(str(notification_id), row.person)}
