"""S6: a /metrics scrape over 1,000,000 deliveries vs the same scrape over 10,000.

The whole exposition (`metrics_render`: database, broker and Redis sources, as the view
answers it), in-process, median of BENCH_S6_SCRAPES scrapes. Each size is seeded
set-based (one INSERT … SELECT generate_series per table): one notification per delivery,
spread over the last 60 days and their monthly partitions, mixed channels and statuses,
1,000 of them delivered within the latency window. Then the rollups are folded as beat
does, autovacuum's work is done (VACUUM ANALYZE), and 1,000 notifications with a queued
delivery are added and left unfolded: the changes of one fold interval, which every
scrape reads on top of the rollups. The scrape at 1 M should stay within 2x of the one
at 10 k. Seeded rows are removed at the end.
"""

from __future__ import annotations

import statistics
import time
from datetime import timedelta
from typing import TYPE_CHECKING

from bench.config import BenchError, env_int
from bench.report import phase, ratio, verdict

if TYPE_CHECKING:  # bench.runner imports this module to run it
    from bench.runner import Bench

SMALL = 10_000
LARGE = 1_000_000
RECENT = 1_000  # delivered within the latency window, at either size
PENDING = 1_000  # accepted since the last fold, at either size
HISTORY_DAYS = 60
WARMUP = 3


def scenario_s6(bench: Bench) -> None:
    """Seed 10 k deliveries, fold, time scrapes; grow to 1 M, fold, time again; print the
    ratio and what the folds cost."""
    from django.conf import settings

    scrapes = max(3, env_int("BENCH_S6_SCRAPES", 15))
    _truncate(bench)
    try:
        _partitions_for_history()
        with phase(f"S6: seeding {SMALL} deliveries"):
            _seed(0, SMALL - RECENT, recent=False)
            _seed(SMALL - RECENT, SMALL, recent=True)
        fold_small = _fold_all()
        _vacuum()
        _seed_pending(0)
        small = _time_scrapes(scrapes)

        with phase(f"S6: seeding up to {LARGE} deliveries"):
            _seed(SMALL, LARGE, recent=False)
        fold_large = _fold_all()
        unvacuumed = _time_scrapes(scrapes)
        _vacuum()
        _seed_pending(1)
        large = _time_scrapes(scrapes)
        rows = _delivery_rows()
    finally:
        _truncate(bench)
        bench.close_db()

    if rows != LARGE + 2 * PENDING:
        raise BenchError(f"expected {LARGE + 2 * PENDING} deliveries, found {rows}")
    value = ratio(large.total, small.total)
    print(
        f"S6 metrics scrape: {value:.3g}x at {LARGE} deliveries vs {SMALL} "
        f"({large.total * 1000:.1f} vs {small.total * 1000:.1f} ms, median of {scrapes}; "
        f"database part {large.database * 1000:.1f} vs {small.database * 1000:.1f} ms; "
        f"{PENDING} changes unfolded each time; {verdict(value, 2.0, at_least=False)})"
    )
    print(
        f"S6 folds: {fold_small.rows} rows in {fold_small.seconds:.2f} s, then "
        f"{fold_large.rows} in {fold_large.seconds:.1f} s "
        f"({fold_large.rows / fold_large.seconds:.0f} rows/s, batches of "
        f"{settings.NOTIFY_METRICS_FOLD_BATCH}); right after that fold, before vacuum, a "
        f"scrape took {unvacuumed.total * 1000:.1f} ms"
    )


class Timing:
    """Median seconds of a whole scrape and of its database part."""

    def __init__(self, total: float, database: float) -> None:
        self.total = total
        self.database = database


class Fold:
    def __init__(self, rows: int, seconds: float) -> None:
        self.rows = rows
        self.seconds = seconds


def _time_scrapes(n: int) -> Timing:
    from deliveries.ops.metrics import BUILT_IN, metrics_render

    totals, databases = [], []
    for i in range(WARMUP + n):
        started = time.perf_counter()
        body = metrics_render()
        middle = time.perf_counter()
        list(BUILT_IN["database"]())
        ended = time.perf_counter()
        if b'notify_metrics_source_up{source="database"} 1.0' not in body:
            raise BenchError("the scrape could not read the database")
        if i >= WARMUP:
            totals.append(middle - started)
            databases.append(ended - middle)
    return Timing(statistics.median(totals), statistics.median(databases))


def _fold_all() -> Fold:
    """Fold until nothing is left, as successive beat runs would."""
    from deliveries.counts import delivery_counts_fold
    from notify.counts import accepted_counts_fold

    rows = 0
    started = time.perf_counter()
    while True:
        done = accepted_counts_fold() + delivery_counts_fold()
        rows += done
        if not done:
            break
    return Fold(rows, time.perf_counter() - started)


def _partitions_for_history() -> None:
    """The monthly partitions of the 60 days seeded (retention would keep them)."""
    from django.utils import timezone

    from history.partitions import partitions_ensure

    partitions_ensure(now=timezone.now() - timedelta(days=HISTORY_DAYS + 1), ahead=4)


def _seed(first: int, last: int, *, recent: bool) -> None:
    """Notifications and deliveries numbered [first, last): old ones spread over the
    history, or `recent` ones delivered within the last hour."""
    from django.db import connection, transaction

    from deliveries.models import Delivery
    from notify.models import Notification

    # Old: accepted 2 h to 60 days ago. Recent: accepted within the last 50 minutes.
    spread = 50 * 60 if recent else HISTORY_DAYS * 86400
    offset = 0 if recent else 7200
    params = _ids() | {"first": first, "last": last - 1, "spread": spread, "offset": offset}
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(
            """
            CREATE TEMP TABLE s6_seed ON COMMIT DROP AS
            SELECT g, gen_random_uuid() AS id,
                   now() - make_interval(
                       secs => %(offset)s + (g::bigint * 7919) %% %(spread)s
                   ) AS at
              FROM generate_series(%(first)s::bigint, %(last)s::bigint) AS g
            """,
            params,
        )
        cursor.execute(
            f"""
            INSERT INTO {Notification._meta.db_table}
                (id, producer_id, event_id, recipient_id, category_id, payload, fingerprint,
                 created_at, counted)
            SELECT id, %(producer)s, 's6-' || g, %(recipient)s, %(category)s, '{{}}', '',
                   at, false
              FROM s6_seed
            """,
            params,
        )
        cursor.execute(
            f"""
            INSERT INTO {Delivery._meta.db_table}
                (notification_id, channel, target, queue, status, reason, attempts,
                 provider_message_id, last_error, created_at, updated_at, finished_at,
                 gate_seal, attempt_budget_from, accepted_at)
            SELECT id, (ARRAY['email', 'inapp', 'sms'])[g %% 3 + 1], 's6-' || g, 'medium',
                   CASE WHEN g %% 20 < 17 THEN 'delivered' WHEN g %% 20 = 17 THEN 'dead'
                        WHEN g %% 20 = 18 THEN 'suppressed' ELSE 'failed' END,
                   '',
                   CASE WHEN g %% 20 < 16 THEN 1 WHEN g %% 20 = 16 THEN 2
                        WHEN g %% 20 = 17 THEN 6 WHEN g %% 20 = 18 THEN 0 ELSE 1 END,
                   '', '', at, at + interval '3 seconds', at + interval '3 seconds', '', 0, at
              FROM s6_seed
            """,
            params,
        )


def _seed_pending(round_: int) -> None:
    """PENDING notifications accepted just now, each with a queued delivery: not folded."""
    from django.db import connection

    from deliveries.models import Delivery
    from notify.models import Notification

    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            WITH n AS (
                INSERT INTO {Notification._meta.db_table}
                    (id, producer_id, event_id, recipient_id, category_id, payload,
                     fingerprint, created_at)
                SELECT gen_random_uuid(), %(producer)s, 's6-pending-{round_}-' || g,
                       %(recipient)s, %(category)s, '{{}}', '', now()
                  FROM generate_series(1, %(n)s::int) AS g
                RETURNING id, event_id, created_at
            )
            INSERT INTO {Delivery._meta.db_table}
                (notification_id, channel, target, queue, status, reason, attempts,
                 provider_message_id, last_error, created_at, updated_at, gate_seal,
                 attempt_budget_from, accepted_at)
            SELECT id, 'email', event_id, 'medium', 'queued', '', 0, '', '', created_at,
                   created_at, '', 0, created_at
              FROM n
            """,
            _ids() | {"n": PENDING},
        )


def _ids() -> dict[str, int]:
    """A producer, the demo recipient and a category for the seeded rows."""
    from bench.config import DEMO_USER
    from notify.models import Category, Producer, Recipient

    producer, _ = Producer.objects.get_or_create(name="bench-s6")
    category = Category.objects.order_by("pk").first()
    if category is None:
        raise BenchError("no category: seed_demo did not run")
    recipient = Recipient.objects.get(user_id=DEMO_USER)
    return {"producer": producer.pk, "recipient": recipient.pk, "category": category.pk}


def _vacuum() -> None:
    """What autovacuum does between scrapes in production: dead row versions of the folded
    rows cleaned, statistics fresh."""
    from django.db import connection

    from deliveries.models import Delivery
    from notify.models import Notification

    with connection.cursor() as cursor:
        for model in (Notification, Delivery):
            cursor.execute(f"VACUUM ANALYZE {model._meta.db_table}")


def _delivery_rows() -> int:
    from deliveries.models import Delivery

    return Delivery.objects.count()


def _truncate(bench: Bench) -> None:
    """Empty the history and the rollups, in the bench's own database only."""
    from django.db import connection

    from deliveries.models import Delivery, DeliveryAttempt, DeliveryCount
    from notify.models import AcceptedCount, EventKey, Notification, Outbox

    if connection.settings_dict["NAME"] != bench.places.database_name:
        raise BenchError(f"refusing to empty {connection.settings_dict['NAME']!r}")
    tables = ", ".join(
        m._meta.db_table
        for m in (
            Notification,
            EventKey,
            Outbox,
            Delivery,
            DeliveryAttempt,
            DeliveryCount,
            AcceptedCount,
        )
    )
    with connection.cursor() as cursor:
        cursor.execute(f"TRUNCATE {tables} CASCADE")
