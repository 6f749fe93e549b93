"""The relay's fair-share rule across producers, as plain functions (notify/fair_share.py):
how much of a class may be published now, and who gets it."""

from __future__ import annotations

import math
from datetime import datetime, timedelta

from django.db import connection, transaction
from django.utils import timezone

from notify.fair_share import (
    RECENT_SECONDS,
    PublishedUnrouted,
    RecentPublishes,
    fair_share_allocate,
    fair_share_budget,
)


def test_a_class_with_a_windows_worth_in_flight_publishes_nothing_more():
    # 1 s of email at 50/s is 50 deliveries; 50 are routed and not sent yet.
    assert fair_share_budget(window_seconds=1.0, rate=50, in_flight=50, most=500) == 0
    assert fair_share_budget(window_seconds=1.0, rate=50, in_flight=80, most=500) == 0


def test_room_frees_as_the_provider_sends_and_never_exceeds_a_round():
    assert fair_share_budget(window_seconds=1.0, rate=50, in_flight=38, most=500) == 12
    assert fair_share_budget(window_seconds=20.0, rate=50, in_flight=0, most=500) == 500


def test_a_quiet_class_may_publish_a_providers_burst_at_once_but_a_busy_one_its_window():
    # 0.5 s at 50/s is 25; the bucket sends 50 at once after a quiet spell.
    assert fair_share_budget(window_seconds=0.5, rate=50, in_flight=0, most=500, burst=50) == 50
    assert fair_share_budget(window_seconds=0.5, rate=50, in_flight=1, most=500, burst=50) == 24
    assert fair_share_budget(window_seconds=0.5, rate=50, in_flight=0, most=30, burst=50) == 30


def test_a_flood_drained_for_a_moment_gets_what_its_bucket_refilled_not_the_burst():
    # A flood's work in flight drains to nothing between two rounds; its bucket is then
    # empty, and a burst of it would go ahead of any newcomer. 0.3 s at 50/s is 15.
    def budget(quiet: float) -> int:
        return fair_share_budget(
            window_seconds=0.3, rate=50, in_flight=0, most=500, burst=100, quiet_seconds=quiet
        )

    assert budget(0.1) == 15  # 5 tokens back: the window decides
    assert budget(1.0) == 50
    assert budget(5.0) == 100  # quiet long enough: the whole burst


def test_a_class_with_no_rate_limited_work_publishes_a_whole_round():
    assert fair_share_budget(window_seconds=1.0, rate=None, in_flight=0, most=500) == 500


def test_a_newcomer_takes_the_whole_budget_ahead_of_a_flood():
    shares = fair_share_allocate(
        waiting={"flood": 5000, "newcomer": 40}, recent={"flood": 300}, budget=12
    )
    assert shares == {"newcomer": 12}


def test_the_newcomer_catches_up_then_the_two_take_turns():
    shares = fair_share_allocate(
        waiting={"flood": 5000, "newcomer": 40}, recent={"flood": 10, "newcomer": 4}, budget=20
    )
    # 6 rows bring the newcomer level with the flood; the other 14 are shared evenly.
    assert shares == {"newcomer": 13, "flood": 7}


def test_a_producer_never_gets_more_than_it_has_waiting_and_the_rest_goes_to_others():
    shares = fair_share_allocate(
        waiting={"flood": 5000, "newcomer": 3}, recent={"flood": 300}, budget=50
    )
    assert shares == {"newcomer": 3, "flood": 47}


def test_two_floods_share_evenly_and_no_budget_publishes_nothing():
    assert fair_share_allocate(waiting={"a": 900, "b": 900}, recent={}, budget=10) == {
        "a": 5,
        "b": 5,
    }
    assert fair_share_allocate(waiting={"a": 900, "b": 3}, recent={}, budget=0) == {}


def test_what_a_producer_published_is_forgotten_after_the_memory():
    now = [100.0]
    recent = RecentPublishes(clock=lambda: now[0])
    recent.add("flood", 50)
    now[0] += 1.0
    recent.add("other", 2)
    assert recent.counts() == {"flood": 50, "other": 2}
    now[0] += RECENT_SECONDS - 0.5  # the flood's publish is now past the memory
    assert recent.counts() == {"other": 2}


def test_how_long_a_class_has_been_quiet_outlives_the_memory():
    now = [100.0]
    recent = RecentPublishes(clock=lambda: now[0])
    assert recent.quiet_seconds() == math.inf  # nothing published yet: the bucket is full
    recent.add("flood", 15)
    now[0] += RECENT_SECONDS + 5.0
    assert recent.counts() == {}
    assert recent.quiet_seconds() == RECENT_SECONDS + 5.0


def test_a_published_row_counts_until_routed_or_until_it_is_given_up_on():
    now = [0.0]
    unrouted = PublishedUnrouted(forget_after=30.0, clock=lambda: now[0])
    unrouted.add(["n1", "n2", "n3"])
    unrouted.keep_only({"n2", "n3"})  # n1 was routed
    assert sorted(unrouted.pending()) == ["n2", "n3"]
    now[0] = 31.0  # a lost route stops holding the class's room (the sweeper has it)
    assert unrouted.pending() == []


# --- The relay's select of each producer's next rows (notify/relay.py) -------------------

FLOOD_WAITING = 3000


def waiting_rows_add(producer_id: int | None, count: int, *, oldest: datetime) -> None:
    """`count` unpublished medium outbox rows (with their notifications) of a producer,
    due one millisecond apart from `oldest`; `None`: rows written before the outbox
    named its producer."""
    from notify.models import Category, Producer, Recipient

    person, _ = Recipient.objects.get_or_create(user_id="fair-person")
    category = Category.objects.get(key="order.shipped")
    owner = producer_id or Producer.objects.get_or_create(name="fair-legacy")[0].pk
    with connection.cursor() as cursor:
        cursor.execute(
            """
            WITH n AS (
                INSERT INTO notify_notification (id, event_id, payload, fingerprint,
                    created_at, category_id, producer_id, recipient_id, occurred_at)
                SELECT gen_random_uuid(), 'fair-' || %(owner)s || '-' || g, '{}', '',
                       now(), %(category)s, %(owner)s, %(person)s, now()
                  FROM generate_series(1, %(count)s) g
                RETURNING id, event_id
            )
            INSERT INTO notify_outbox
                (notification_id, queue, created_at, due_at, publish_attempts, producer_id)
            SELECT id, 'medium', now(),
                   %(oldest)s + split_part(event_id, '-', 3)::int * interval '1 ms', 0,
                   %(producer)s
              FROM n
            """,
            {
                "owner": owner,
                "category": category.pk,
                "person": person.pk,
                "count": count,
                "oldest": oldest,
                "producer": producer_id,
            },
        )
        cursor.execute("ANALYZE notify_outbox")


def outbox_rows_read(plan: dict) -> int:
    """Rows the executed plan read from the outbox, over every node and loop."""
    read = 0
    if plan.get("Relation Name") == "notify_outbox":
        read += plan["Actual Rows"] * plan["Actual Loops"]
    return read + sum(outbox_rows_read(child) for child in plan.get("Plans", []))


def test_each_producer_gets_its_oldest_rows_and_rows_without_a_producer_are_not_left_behind(
    demo_data,
):
    from notify.models import Producer
    from notify.relay import fair_rows_lock

    flood, few = Producer.objects.create(name="flood"), Producer.objects.create(name="few")
    start = timezone.now() - timedelta(minutes=5)
    waiting_rows_add(flood.pk, 300, oldest=start)
    waiting_rows_add(few.pk, 3, oldest=start + timedelta(seconds=1))
    waiting_rows_add(None, 2, oldest=start + timedelta(seconds=2))

    with transaction.atomic():
        rows = fair_rows_lock(queue="medium", cutoff=timezone.now(), each=5)

    by_producer: dict[int | None, list[datetime]] = {}
    for _, _, _, producer_id, due_at in rows:
        by_producer.setdefault(producer_id, []).append(due_at)
    assert {p: len(due) for p, due in by_producer.items()} == {flood.pk: 5, few.pk: 3, None: 2}
    assert by_producer[flood.pk] == [start + timedelta(milliseconds=i) for i in range(1, 6)]
    assert [row[4] for row in rows] == sorted(row[4] for row in rows)


def test_a_floods_waiting_rows_are_not_read_again_each_relay_round(demo_data):
    from notify.models import Producer
    from notify.relay import _FAIR_ROWS_SQL

    flood, few = Producer.objects.create(name="flood"), Producer.objects.create(name="few")
    start = timezone.now() - timedelta(minutes=5)
    waiting_rows_add(flood.pk, FLOOD_WAITING, oldest=start)
    waiting_rows_add(few.pk, 3, oldest=start)

    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(
            "EXPLAIN (ANALYZE, FORMAT JSON) " + _FAIR_ROWS_SQL,
            {"queue": "medium", "cutoff": timezone.now(), "each": 10},
        )
        plan = cursor.fetchone()[0][0]["Plan"]  # psycopg decodes the JSON

    # A round reads each producer's next rows and a step per producer, not the flood.
    assert outbox_rows_read(plan) < 50


def test_an_accepted_notifications_outbox_row_names_its_producer_for_the_relays_turns(
    api, producer_key
):
    from notify.models import Outbox

    api.put("/v1/users/u1", {"email": "u1@example.com", "locale": "en"}, format="json")
    order = {"order_number": "A-1", "delivery_date": "2026-12-03", "items_count": 1}
    events = [
        {"event_id": f"e{i}", "user_id": "u1", "category": "order.shipped", "payload": order}
        for i in range(3)
    ]
    response = api.post("/v1/notifications/batch", {"events": events}, format="json")
    assert response.status_code == 200, response.content
    assert (
        list(Outbox.objects.values_list("producer_id", flat=True))
        == [producer_key.api_key.producer_id] * 3
    )
