"""S4: a campaign's fan-out, in-process, vs a plain batched INSERT of the same rows.

Subject: `campaign_launch` (audience "all": the BENCH_CAMPAIGN_RECIPIENTS bench
recipients, plus the demo users, who also consented), then `campaign_fan_out` called in a
loop until it reports no more, with the default batch size; timed from the first batch
to the last. Each batch also publishes the next fan-out task to the bench vhost's `low`
queue after commit; nothing consumes it, and the queues are purged after the run.

Baseline: the same batches of notification + outbox rows for the bench recipients, one
plain INSERT … SELECT per batch (keyset on the recipient id, no audience condition,
fingerprint or conflict handling), each in its own transaction, into the same tables.
Both are emptied (TRUNCATE) before every run.
"""

from __future__ import annotations

import json
import statistics
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from bench.campaign_seed import (
    BENCH_CAMPAIGN_NAME,
    CAMPAIGN_CATEGORY,
    CAMPAIGN_PAYLOAD,
    PREFIX,
    campaign_reset,
    seed_recipients,
)
from bench.config import BenchError
from bench.report import phase, ratio, verdict

if TYPE_CHECKING:  # bench.runner imports this module to run it
    from bench.runner import Bench


@dataclass(frozen=True)
class FanOut:
    """One timed fan-out: how many recipients got a notification, in how many batches."""

    recipients: int
    batches: int
    seconds: float

    @property
    def rate(self) -> float:
        return self.recipients / self.seconds if self.seconds else float("nan")


def scenario_s4(bench: Bench) -> None:
    """Fan out a campaign to BENCH_CAMPAIGN_RECIPIENTS recipients and insert the same rows
    plainly, BENCH_RUNS times each, alternating; print recipients/s and the ratio."""
    from django.conf import settings

    n = bench.config.campaign_recipients
    batch_size = settings.NOTIFY_CAMPAIGN_BATCH_SIZE
    with phase(f"S4: seeding {n} recipients"):
        added = seed_recipients(bench, n, exactly=True)
    bench.close_db()
    plains: list[FanOut] = []
    fanouts: list[FanOut] = []
    for _ in range(bench.config.runs):
        campaign_reset(bench)
        plains.append(plain_insert(bench, batch_size))
        campaign_reset(bench)
        fanouts.append(campaign_run(bench, batch_size))
    campaign_reset(bench)  # leaves no notifications, and no fan-out task queued

    if any(f.recipients < n for f in fanouts + plains):
        raise BenchError(
            f"fewer rows than recipients: fan-outs {[f.recipients for f in fanouts]}, "
            f"plain {[p.recipients for p in plains]} of {n}"
        )
    subject = statistics.median(f.rate for f in fanouts)
    baseline = statistics.median(p.rate for p in plains)
    value = ratio(subject, baseline)
    print(
        f"S4 campaign fan-out: {value:.3g}x plain INSERT ({subject:.0f} recipients/s vs "
        f"{baseline:.0f}; {fanouts[0].recipients} recipients in {fanouts[0].batches} "
        f"batches of {batch_size}, notification + outbox rows, in-process; "
        f"{verdict(value, 0.3, at_least=True)})"
    )
    print(
        f"S4 seconds per run: fan-out {statistics.median(f.seconds for f in fanouts):.2f}, "
        f"plain {statistics.median(p.seconds for p in plains):.2f}"
        + (f" ({added} recipients seeded this run)" if added else "")
    )


def campaign_run(bench: Bench, batch_size: int) -> FanOut:
    """Launch a campaign to everyone with consent and fan it out in-process to the end."""
    from campaigns.fanout import campaign_fan_out, campaign_launch
    from campaigns.models import AudienceKind, Campaign, CampaignStatus
    from notify.models import Category

    category = Category.objects.get(key=CAMPAIGN_CATEGORY)
    campaign = campaign_launch(
        name=f"{BENCH_CAMPAIGN_NAME} s4 {time.time_ns()}",
        category=category,
        payload=CAMPAIGN_PAYLOAD,
        audience_kind=AudienceKind.ALL,
        audience_spec={},
    )
    # The launch published the first fan-out task (nobody consumes it); time the batches.
    batches = 0
    started = time.perf_counter()
    while True:
        step = campaign_fan_out(campaign_id=campaign.pk, batch_size=batch_size)
        batches += 1
        if not step.more:
            break
    seconds = time.perf_counter() - started
    campaign.refresh_from_db()
    if campaign.status != CampaignStatus.DONE:
        raise BenchError(f"campaign {campaign.pk} ended {campaign.status}, not done")
    done = Campaign.objects.filter(pk=campaign.pk).values_list("created_count", flat=True)
    created = int(done.first() or 0)
    bench.close_db()
    return FanOut(created, batches, seconds)


def plain_insert(bench: Bench, batch_size: int) -> FanOut:
    """The baseline: batches of plain INSERT … SELECT of notification, event key and outbox rows for
    the bench recipients, keyset on the recipient id, one transaction per batch."""
    from django.db import connection, transaction
    from django.utils import timezone

    from campaigns.fanout import ADMIN_PRODUCER
    from notify.models import Category, EventKey, Notification, Outbox, Producer, Recipient

    category = Category.objects.get(key=CAMPAIGN_CATEGORY)
    producer, _ = Producer.objects.get_or_create(name=ADMIN_PRODUCER)
    statement = f"""
        WITH batch AS (
            SELECT r.id, r.user_id, gen_random_uuid() AS notification_id
              FROM {Recipient._meta.db_table} r
             WHERE r.id > %(after)s AND r.user_id LIKE %(like)s
             ORDER BY r.id LIMIT %(limit)s
        ), k AS (
            INSERT INTO {EventKey._meta.db_table} (notification_id, producer_id, event_id)
            SELECT notification_id, %(producer)s, %(prefix)s || user_id FROM batch
        ), n AS (
            INSERT INTO {Notification._meta.db_table}
                (id, producer_id, event_id, recipient_id, category_id, payload, fingerprint,
                 created_at)
            SELECT b.notification_id, %(producer)s, %(prefix)s || b.user_id, b.id,
                   %(category)s, %(payload)s::jsonb, '', %(now)s
              FROM batch b
            RETURNING id
        ), o AS (
            INSERT INTO {Outbox._meta.db_table}
                (notification_id, queue, created_at, due_at, publish_attempts)
            SELECT id, %(queue)s, %(now)s, %(now)s, 0 FROM n
            RETURNING 1
        )
        SELECT (SELECT max(id) FROM batch), (SELECT count(*) FROM o)
    """
    params = {
        "like": PREFIX + "%",
        "limit": batch_size,
        "producer": producer.pk,
        "prefix": f"bench-plain:{time.time_ns()}:",
        "category": category.pk,
        "payload": json.dumps(CAMPAIGN_PAYLOAD),
        "queue": category.queue,
    }
    after, created, batches = 0, 0, 0
    started = time.perf_counter()
    while True:
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(statement, {**params, "after": after, "now": timezone.now()})
            last_id, inserted = cursor.fetchone()
        batches += 1
        created += inserted
        if inserted < batch_size:  # a short batch: like the fan-out, that was the last
            break
        after = last_id
    seconds = time.perf_counter() - started
    bench.close_db()
    return FanOut(created, batches, seconds)
