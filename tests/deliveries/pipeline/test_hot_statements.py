"""The statements written once as SQL on the hot path load and write what the ORM would:
the sender's load, the route's lock and the route's write."""

from __future__ import annotations

import threading
import uuid
from datetime import UTC, datetime

import psycopg
from django.db import connection, connections
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from analytics.events import riding_sql
from analytics.models import AnalyticsEvent
from deliveries.channels.base import SendResult
from deliveries.models import Delivery, DeliveryAttempt, DeliveryStatus
from deliveries.pipeline.claim import (
    CLAIM_SQL,
    LOAD_SQL,
    deliveries_claim,
    deliveries_load,
    delivery_load,
)
from deliveries.pipeline.outcome import (
    AttemptResult,
    Tried,
    attempts_record,
)
from deliveries.pipeline.record_sql import OUTCOMES_SQL, RECORD_SQL, record_sql
from deliveries.pipeline.route_lock import LOCK_SQL, notification_lock, notifications_lock
from deliveries.pipeline.route_write import ROUTED_SQL, route_write_sql
from deliveries.pipeline.routing import notification_route
from deliveries.pipeline.suppression import address_suppress
from notify.models import Category, Notification, Producer, Recipient
from notify.services import ACCEPT_SQL, notification_accept
from pgarrays import ARRAY_PARAMETER, PlannedOnce, array_literal

PAYLOAD = {"order_number": "H-1", "delivery_date": "2026-12-03", "items_count": 2}


def accepted(user_id: str, channels: list[str]) -> Notification:
    result = notification_accept(
        producer=Producer.objects.get_or_create(name="hot")[0],
        event_id=str(uuid.uuid4()),
        user_id=user_id,
        category=Category.objects.get(key="order.shipped"),
        payload=PAYLOAD,
        channels=channels,
        ttl_seconds=None,
    )
    return Notification.objects.get(pk=result.notification_id)


def fields(instance) -> dict:
    return {f.attname: getattr(instance, f.attname) for f in instance._meta.concrete_fields}


def test_the_senders_load_is_the_orms_row_with_its_relations_in_one_statement(demo_data):
    Recipient.objects.create(user_id="hot-1", email="hot1@example.com", locale="de")
    notification = accepted("hot-1", ["inapp", "email"])
    notification_route(notification_id=notification.pk)
    notification.refresh_from_db()
    email = Delivery.objects.get(notification=notification, channel="email")
    delivery_load(delivery_id=email.pk)  # template versions are kept in memory after

    with CaptureQueriesContext(connection) as queries:
        loaded = delivery_load(delivery_id=email.pk)
        delivery = loaded.delivery
        # Related rows come with it, as select_related would bring them.
        recipient, category = delivery.notification.recipient, delivery.notification.category
    assert len(queries) == 1

    assert fields(delivery) == fields(email)
    assert fields(delivery.notification) == fields(notification)
    assert delivery.notification.payload == PAYLOAD  # JSON decoded, not a string
    assert recipient.user_id == "hot-1" and category.key == "order.shipped"
    assert loaded.version is not None and loaded.version.template.channel == "email"
    assert delivery_load(delivery_id=email.pk + 10_000) is None


def test_a_batch_loads_its_category_once_for_all_its_rows(demo_data):
    # A batch is mostly one category: its JSON columns (schema, sample payloads, labels)
    # are decoded once, and every row of the batch gets that one instance.
    for number in range(3):
        Recipient.objects.create(user_id=f"hot-b{number}", email=f"b{number}@example.com")
    notifications = [accepted(f"hot-b{number}", ["email"]) for number in range(3)]
    locked = notifications_lock(notification_ids=[n.pk for n in notifications])
    categories = [n.category for n in locked]
    assert len({id(category) for category in categories}) == 1
    assert fields(categories[0]) == fields(Category.objects.get(key="order.shipped"))

    for notification in notifications:
        notification_route(notification_id=notification.pk)
    emails = Delivery.objects.filter(notification__in=notifications, channel="email")
    loaded = deliveries_load(delivery_ids=[email.pk for email in emails])
    categories = [item.delivery.notification.category for item in loaded.values()]
    assert len(categories) == 3 and len({id(category) for category in categories}) == 1
    assert fields(categories[0]) == fields(Category.objects.get(key="order.shipped"))


def test_the_routes_lock_reads_the_recipients_bounced_addresses(demo_data):
    Recipient.objects.create(user_id="hot-2", email="Hot2@Example.com", phone="+15550100")
    notification = accepted("hot-2", ["email"])
    address_suppress(channel="email", address="hot2@example.com", evidence="test")
    address_suppress(channel="sms", address="+15550100", evidence="test")

    locked = notification_lock(notification_id=notification.pk)

    assert fields(locked) == fields(notification)
    assert sorted(locked.suppressed) == ["email:hot2@example.com", "sms:+15550100"]
    assert [locale for locale, _ in locked.inapp_published]  # the demo's in-app templates


def test_the_routes_write_makes_each_delivery_its_attempt_and_marks_routed(demo_data):
    Recipient.objects.create(user_id="hot-3", email="hot3@example.com", locale="en")
    notification = accepted("hot-3", ["inapp", "email"])

    started = notification_route(notification_id=notification.pk)

    rows = {d.channel: d for d in Delivery.objects.filter(notification=notification)}
    assert set(rows) == {"inapp", "email"}
    assert sorted(started) == sorted(d.pk for d in rows.values())
    inapp, email = rows["inapp"], rows["email"]
    assert inapp.status == DeliveryStatus.DELIVERED and inapp.attempts == 1
    assert email.status == DeliveryStatus.QUEUED and email.enqueued_at is not None
    for row in rows.values():
        assert row.accepted_at == notification.created_at  # the notification's month
        assert row.gate_seal and row.recipient_id == notification.recipient_id
        assert row.created_at is not None and row.updated_at is not None
        assert row.counted_status == ""  # the database's default: not counted yet
    [attempt] = DeliveryAttempt.objects.filter(delivery__notification=notification)
    assert attempt.delivery_id == inapp.pk and attempt.number == 1
    assert attempt.accepted_at == notification.created_at
    notification.refresh_from_db()
    assert notification.routed_at is not None


def test_connections_compile_nothing_just_in_time(db):
    """A batch's claim once spent 0.9 s of PostgreSQL CPU compiling itself (its
    estimated cost over a large partitioned table passed jit_above_cost) for a statement
    that runs in ~10 ms: every connection the processes open keeps JIT off."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT current_setting('jit')")
        assert cursor.fetchone() == ("off",)
    params = connection.get_connection_params()
    assert params["options"] == "-c jit=off"


def _next_month_noon() -> datetime:
    """The 10th of next month, at noon UTC."""
    now = timezone.now()
    year, month = divmod(now.year * 12 + now.month, 12)  # next month's, counted from 0
    return datetime(year, month + 1, 10, 12, tzinfo=UTC)


# Next month (its partitions are always made, one month ahead), which no other test
# writes in: they have never been analyzed, as a new month's are in their first minute,
# or a fresh install's.
YOUNG_MONTH = _next_month_noon()
YOUNG_PARTITIONS = [
    f"{t}_p{YOUNG_MONTH:%Y_%m}" for t in ("notify_notification", "deliveries_delivery")
]


def _rows_read(plan: dict) -> int:
    """Rows every node of an EXPLAIN ANALYZE plan produced or threw away, over all its
    loops: what a statement read, whatever the plan's shape."""
    loops = plan.get("Actual Loops", 1)
    here = (plan.get("Actual Rows", 0) + plan.get("Rows Removed by Filter", 0)
            + plan.get("Rows Removed by Join Filter", 0)) * loops  # fmt: skip
    return here + sum(_rows_read(child) for child in plan.get("Plans", []))


def _young_campaign_fan_out() -> None:
    """2,000 notifications of one campaign batch (one created_at, in-app and email each)
    in a month whose partitions were never analyzed."""
    category = Category.objects.get(key="order.shipped")
    producer = Producer.objects.get_or_create(name="young")[0]
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT c.reltuples FROM pg_class c WHERE c.relname = ANY(%s)",
            [YOUNG_PARTITIONS],
        )
        assert [row[0] for row in cursor.fetchall()] == [-1, -1]  # never analyzed
        cursor.execute(
            """
            WITH r AS (
                INSERT INTO notify_recipient (user_id, email, phone, locale, timezone,
                                              created_at, updated_at)
                SELECT 'young-' || g, 'young' || g || '@example.com', '', 'en', '',
                       now(), now()
                  FROM generate_series(1, 2000) g RETURNING id
            ), n AS (
                INSERT INTO notify_notification (id, producer_id, event_id, recipient_id,
                       category_id, payload, channels, fingerprint, created_at)
                SELECT gen_random_uuid(), %(producer)s, 'campaign:young:' || r.id, r.id,
                       %(category)s, '{}', '["inapp", "email"]', '', %(month)s
                  FROM r RETURNING id, recipient_id, created_at
            )
            INSERT INTO deliveries_delivery (notification_id, channel, target, queue,
                   status, reason, attempts, provider_message_id, last_error, created_at,
                   updated_at, gate_seal, attempt_budget_from, accepted_at, recipient_id,
                   occurred_at)
            SELECT n.id, c.channel, '', 'low', 'queued', '', 0, '', '', now(), now(), '',
                   0, n.created_at, n.recipient_id, n.created_at
              FROM n, (VALUES ('inapp'), ('email')) c(channel)
            """,
            {"producer": producer.pk, "category": category.pk, "month": YOUNG_MONTH},
        )


def test_the_senders_load_of_a_campaign_batch_reads_its_own_rows_on_a_young_partition(
    demo_data,
):
    # A campaign's fan-out gives thousands of notifications one created_at. With no
    # statistics the planner once matched a batch's deliveries to their notifications
    # by that time alone, or scanned whole tables: each batch read them all (here some
    # 8,000 rows for 20 deliveries; now a few hundred).
    _young_campaign_fan_out()
    batch = list(
        Delivery.objects.filter(accepted_at=YOUNG_MONTH, channel="email")
        .order_by("pk")
        .values_list("pk", flat=True)[1000:1020]
    )
    assert len(deliveries_load(delivery_ids=batch)) == 20

    with connection.cursor() as cursor:
        cursor.execute(
            f"EXPLAIN (ANALYZE, FORMAT JSON) {LOAD_SQL}",
            {"ids": array_literal(batch)},
        )
        plan = cursor.fetchone()[0][0]["Plan"]
    assert _rows_read(plan) < 40 * len(batch)


def test_the_routes_routed_mark_reads_its_own_rows_on_a_young_partition(demo_data):
    # As a join on (id, created_at), a partition with no statistics was scanned whole
    # for each routed batch: a campaign's route read every one of its notifications
    # for every 200 it routed.
    _young_campaign_fan_out()
    batch = list(
        Notification.objects.filter(created_at=YOUNG_MONTH)
        .order_by("pk")
        .values_list("pk", "created_at")[1000:1020]
    )
    params = {
        "now": timezone.now(),
        "routed_ids": array_literal([pk for pk, _ in batch]),
        "routed_months": array_literal([month for _, month in batch]),
    }
    with connection.cursor() as cursor:
        cursor.execute(f"EXPLAIN (ANALYZE, FORMAT JSON) {ROUTED_SQL}", params)
        plan = cursor.fetchone()[0][0]["Plan"]
    assert _rows_read(plan) < 40 * len(batch)
    routed = Notification.objects.filter(created_at=YOUNG_MONTH, routed_at__isnull=False)
    assert sorted(routed.values_list("pk", flat=True)) == sorted(pk for pk, _ in batch)


def test_the_senders_record_finds_its_own_rows_on_a_young_partition(demo_data):
    # The record writes each outcome where the claim still holds (`sending`, its claim's
    # time). With no statistics the planner found them through the index of every
    # delivery being sent, and a campaign's record read all of them for each round.
    _young_campaign_fan_out()
    claimed_at = timezone.now()
    Delivery.objects.filter(accepted_at=YOUNG_MONTH).update(
        status=DeliveryStatus.SENDING, claimed_at=claimed_at, attempts=1
    )
    batch = list(
        Delivery.objects.filter(accepted_at=YOUNG_MONTH, channel="email")
        .order_by("pk")
        .values_list("pk", flat=True)[1000:1020]
    )
    n = len(batch)
    params = {
        "now": timezone.now(),
        "id": array_literal(batch),
        "month": array_literal([YOUNG_MONTH] * n),
        "claimed_at": array_literal([claimed_at] * n),
        "status": array_literal([DeliveryStatus.DELIVERED.value] * n),
        "finished_at": array_literal([claimed_at] * n),
        "last_error": array_literal([""] * n),
        "clear_enqueued": array_literal([False] * n),
        "bump": array_literal([0] * n),
        "handovers": array_literal([0] * n),
        **{name: array_literal([None] * n)
           for name in ("reason", "provider_message_id", "next_attempt_at",
                        "pin")},
    }  # fmt: skip
    with connection.cursor() as cursor:
        cursor.execute(f"EXPLAIN (ANALYZE, FORMAT JSON) {OUTCOMES_SQL}", params)
        plan = cursor.fetchone()[0][0]["Plan"]
    assert _rows_read(plan) < 40 * n
    delivered = Delivery.objects.filter(accepted_at=YOUNG_MONTH, status=DeliveryStatus.DELIVERED)
    assert sorted(delivered.values_list("pk", flat=True)) == sorted(batch)


def test_an_outcome_is_written_when_another_transaction_changed_its_row_meanwhile(
    transactional_db, demo_data, settings, session_worker_paused
):
    # The route commits here, so its send is published: the suite's worker, if an earlier
    # test started it, must not take the email and record its own first attempt.
    # The record updates each row where its probe found it. Another transaction that
    # changes the row first (here while the record waits for its lock) moves it: the
    # outcome must still be written, since the claim still holds, and counted (its
    # analytics event did not ride in the first statement: the announcement writes it).
    settings.NOTIFY_ANALYTICS_ENABLED = True
    Recipient.objects.create(user_id="moved-1", email="moved1@example.com")
    notification = accepted("moved-1", ["email"])
    notification_route(notification_id=notification.pk)
    email = Delivery.objects.get(notification=notification, channel="email")
    claimed_at = timezone.now()
    Delivery.objects.filter(pk=email.pk).update(
        status=DeliveryStatus.SENDING, claimed_at=claimed_at, attempts=1
    )
    loaded = delivery_load(delivery_id=email.pk)
    tried = Tried(loaded.delivery, SendResult.delivered(provider_message_id="<m@x>"), "",
                  claimed_at, claimed_at, duration=5)  # fmt: skip
    other = psycopg.connect(
        dbname=connection.settings_dict["NAME"], host="127.0.0.1", user="postgres",
        autocommit=False,
    )  # fmt: skip
    try:
        other.execute("UPDATE deliveries_delivery SET updated_at = now() WHERE id = %s", [email.pk])
        reports: list = []
        recording = threading.Thread(target=lambda: reports.extend(attempts_record([tried])))
        recording.start()
        recording.join(0.5)
        assert recording.is_alive()  # waiting for the other transaction's row lock
        other.commit()
        recording.join(10)
    finally:
        other.close()
        connections.close_all()
    assert [report.result for report in reports] == [AttemptResult.DELIVERED]
    email.refresh_from_db()
    assert (email.status, email.provider_message_id) == (DeliveryStatus.DELIVERED, "<m@x>")
    kinds = AnalyticsEvent.objects.filter(delivery_id=email.pk).values_list("kind", flat=True)
    assert sorted(kinds) == ["accepted", "delivered"]


def _plans(statement_start: str) -> tuple[int, int]:
    """(generic, custom) plans PostgreSQL made for this connection's prepared statement
    that starts so."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT generic_plans, custom_plans FROM pg_prepared_statements"
            " WHERE ltrim(statement, E' \\n') LIKE %s",
            [statement_start + "%"],
        )
        return cursor.fetchone()


def test_a_login_codes_claim_is_planned_once_per_connection_not_at_every_run(demo_data):
    # A claim of one delivery was planned afresh at every run (some 3 ms, against 0.3 ms
    # to run it): the planner counted the one-element array and found a plan for it
    # cheaper than the generic plan, which assumes ten.
    Recipient.objects.create(user_id="plan-1", email="plan1@example.com")
    notification = accepted("plan-1", ["email"])
    notification_route(notification_id=notification.pk)
    email = Delivery.objects.get(notification=notification, channel="email")
    loaded = delivery_load(delivery_id=email.pk)
    # Prepared at its first run on the connection (pgarrays.cursor), so PostgreSQL's
    # five plans for the values at hand are its first five, and the sixth is generic.
    for _ in range(7):
        deliveries_claim(loaded=[loaded], now=timezone.now())
    generic, custom = _plans("UPDATE deliveries_delivery AS d")
    assert custom == 5 and generic > 0, (generic, custom)


def test_no_hot_statement_shows_the_planner_its_arrays_lengths():
    for statement in (LOAD_SQL, CLAIM_SQL, RECORD_SQL, OUTCOMES_SQL, ROUTED_SQL,
                      route_write_sql(), LOCK_SQL, ACCEPT_SQL,
                      riding_sql("outcome")):  # fmt: skip
        assert ARRAY_PARAMETER.findall(statement) == []
        assert type(statement) is PlannedOnce  # prepared at its first run
    assert type(record_sql(riding_sql("outcome"))) is PlannedOnce
