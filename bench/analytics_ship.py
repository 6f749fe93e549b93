"""S12: delivery analytics, in-process on the embedded store (chDB).

Shipping: BENCH_S12_EVENTS (1,000,000) events are queued in PostgreSQL set-based (one
INSERT … SELECT generate_series: campaigns, channels, kinds and people mixed), then
shipped by the shipper's own batches (`batch_ship`, NOTIFY_ANALYTICS_BATCH each: COPY
out of PostgreSQL, INSERT into the store with its rollups, commit) until none is left.
Baseline, same run and the same engine: the same rows, already copied out as CSV, in
one bulk INSERT into the store's own tables (the events and, through their views, the
rollups), emptied again before shipping. The ratio is baseline seconds / shipping
seconds (target ≥ 0.5). A second line gives the ratio to the same INSERT into a table
of the events' definition without rollups: what the rollups themselves cost.

Reports: BENCH_S12_REPORT_EVENTS (10,000,000) events generated inside the store (they
feed the rollups as shipped ones do), then the median of BENCH_S12_REPORTS campaign
reports (the biggest campaign) and of as many 30-day deliveries reports grouped by day
and channel (target < 1 s each).

The store lives in var/bench/analytics (emptied first). Not measured here: the store's
lag during S7's drain and S2/S7 with analytics on (they need the `analytics` process in
the bench's stack).
"""

from __future__ import annotations

import shutil
import statistics
import time
from datetime import date, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

from bench.config import env_int
from bench.report import phase, ratio, verdict

if TYPE_CHECKING:
    from bench.runner import Bench

S12_TARGET = 0.5  # shipping / a bare bulk insert of the same rows into the same engine
S12_REPORT_TARGET = 1.0  # seconds for a report over BENCH_S12_REPORT_EVENTS
BARE = "notify_analytics.events_bare"
CAMPAIGNS = 50  # campaigns the generated events belong to (the report reads the first)


def _queue(n: int) -> None:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("TRUNCATE analytics_analyticsevent")
        cursor.execute(
            "INSERT INTO analytics_analyticsevent (kind, occurred_at, producer_id, campaign_id,"
            " category, channel, provider, reason, delivery_id, notification_id, person,"
            " latency_ms)"
            " SELECT (ARRAY['accepted','sent','delivered','reached','opened'])[1 + i %% 5],"
            " now() - (i %% 86400) * interval '1 second', 1 + i %% 3, 1 + i %% %(c)s,"
            " 'promo.weekly', (ARRAY['email','inapp','sms'])[1 + i %% 3], 'smtp', '', i,"
            " gen_random_uuid(), md5((i %% 100000)::text)::char(32), i %% 5000"
            " FROM generate_series(1, %(n)s) AS i",
            {"n": n, "c": CAMPAIGNS},
        )


def _csv_copy() -> list[bytes]:
    """The queued rows as the shipper's COPY writes them into the store (without
    deleting them): the same statement, reading the queue instead of emptying it."""
    from django.db import connection

    from analytics.store.shipper import store_rows_sql

    select = store_rows_sql("SELECT * FROM analytics_analyticsevent ORDER BY id")
    with connection.cursor() as cursor, cursor.copy(select) as copy:
        return [bytes(chunk) for chunk in copy]


def scenario_s12(bench: Bench) -> None:
    """Shipping vs a bare bulk insert; then reports over many events. Prints the lines."""
    from django.conf import settings

    from analytics.store.backend import store_open
    from analytics.store.reports import campaign_report, deliveries_report
    from analytics.store.schema import EVENT_COLUMNS, EVENTS, schema_ensure, store_truncate
    from analytics.store.shipper import batch_ship

    n = max(1000, env_int("BENCH_S12_EVENTS", 1_000_000))
    big = max(n, env_int("BENCH_S12_REPORT_EVENTS", 10_000_000))
    runs = max(3, env_int("BENCH_S12_REPORTS", 9))
    data = Path(settings.BASE_DIR) / "var" / "bench" / "analytics"
    shutil.rmtree(data, ignore_errors=True)
    settings.NOTIFY_ANALYTICS_DATA_DIR = str(data)
    settings.NOTIFY_ANALYTICS_READER_ADDRESS = ""
    store = store_open(owner=True)
    schema_ensure(store)
    store_truncate(store)
    store.command(f"CREATE TABLE IF NOT EXISTS {BARE} AS {EVENTS}")
    with phase(f"S12: queueing {n} events"):
        _queue(n)
        chunks = _csv_copy()
    rows = sum(chunk.count(b"\n") for chunk in chunks)  # a `delivered` queued is two

    started = time.perf_counter()
    store.insert_csv(EVENTS, EVENT_COLUMNS, chunks)
    bare = time.perf_counter() - started
    store_truncate(store)
    started = time.perf_counter()
    store.insert_csv(BARE, EVENT_COLUMNS, chunks)
    bare_plain = time.perf_counter() - started
    del chunks

    started = time.perf_counter()
    shipped = 0
    while batch := batch_ship(store=store):
        shipped += batch
    shipping = time.perf_counter() - started
    bench.close_db()
    value = ratio(1 / shipping, 1 / bare)
    print(
        f"S12 analytics shipping: {value:.3g}x a bare bulk insert into the store's tables "
        f"({shipped / shipping:,.0f} events/s vs {rows / bare:,.0f}; {shipped} shipped in "
        f"batches of {settings.NOTIFY_ANALYTICS_BATCH}) — "
        f"{verdict(value, S12_TARGET, at_least=True)}"
    )
    print(
        f"S12 analytics shipping vs a bare insert into a table without rollups: "
        f"{ratio(1 / shipping, 1 / bare_plain):.3g}x ({rows / bare_plain:,.0f} events/s)"
    )

    with phase(f"S12: {big} events generated in the store"):
        store.command(
            f"INSERT INTO {EVENTS} SELECT number + 1000000000, ['accepted','sent','delivered',"
            "'reached','opened','failed'][1 + number % 6],"
            " now64(3) - toIntervalSecond(number % 2592000),"
            f" 1, 1 + number % {CAMPAIGNS}, 'promo.weekly',"
            " ['email','inapp','sms'][1 + number % 3],"
            " 'smtp', if(number % 6 = 5, 'rejected', ''), number, generateUUIDv4(),"
            f" hex(number % 100000), number % 5000 FROM numbers({big - shipped})"
        )
    campaign_times, delivery_times = [], []
    end = date.today()
    for _ in range(runs):
        started = time.perf_counter()
        campaign_report(store=store, producer_id=1, campaign_id=1)
        campaign_times.append(time.perf_counter() - started)
        started = time.perf_counter()
        deliveries_report(
            store=store,
            producer_id=1,
            start=end - timedelta(days=30),
            end=end,
            group_by=("day", "channel"),
        )
        delivery_times.append(time.perf_counter() - started)
    for name, times in (("campaign report", campaign_times), ("deliveries report", delivery_times)):
        value = statistics.median(times)
        print(
            f"S12 {name} over {big:,} events: {value * 1000:.0f} ms (median of {runs}) — "
            f"{verdict(value, S12_REPORT_TARGET, at_least=False, unit=' s')}"
        )
    store.command(f"DROP TABLE IF EXISTS {BARE}")
