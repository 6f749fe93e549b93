"""Campaign audiences for S3, S4 and S7: bench recipients seeded set-based, and the resets.

Recipients are `bench-r-0000001`, ... with an email, all-marketing consent and a quiet
window of none (start = end), so the gate lets a campaign really send at any hour. They
are seeded with three INSERT … SELECT statements over generate_series, once: later runs
only add the missing ones (the bench database outlives a run). S7 seeds its own
(another prefix, consent to its own category only, so S4's "everyone with consent"
never counts them).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from bench.config import BenchError

if TYPE_CHECKING:  # Django is set up only after the bench has prepared its places
    from bench.runner import Bench

PREFIX = "bench-r-"
DIGITS = 7
CAMPAIGN_CATEGORY = "promo.weekly"
CAMPAIGN_PAYLOAD = {"headline": "Bench sale: -30% on boots", "url": "https://shop.example/x"}
BENCH_CAMPAIGN_NAME = "bench"  # campaigns the bench launched start with this name


def user_id(number: int, prefix: str = PREFIX) -> str:
    """The user id of bench recipient `number` (1-based), as the seeding SQL spells it."""
    return f"{prefix}{number:0{DIGITS}d}"


def guard_database(bench: Bench) -> None:
    """Refuse to write or wipe anywhere but the bench's own database."""
    from django.db import connection

    if connection.settings_dict["NAME"] != bench.places.database_name:
        raise BenchError(f"refusing to touch {connection.settings_dict['NAME']!r}")


def seed_recipients(
    bench: Bench,
    count: int,
    *,
    exactly: bool = False,
    prefix: str = PREFIX,
    first: int = 1,
    consent_category: int | None = None,
) -> int:
    """Make sure bench recipients first..count exist with email, consent and no quiet
    hours; with `exactly`, remove those beyond `count` (S4's audience "all" must be count).
    Consent is to all marketing, or to `consent_category` (a category id) only.

    Returns how many recipients were added.
    """
    from django.db import connection, transaction

    from notify.models import Recipient
    from preferences.models import ConsentRecord, QuietHours

    guard_database(bench)
    recipients = Recipient._meta.db_table
    like = prefix + "%"
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(
            f"""
            INSERT INTO {recipients}
                (user_id, email, phone, locale, timezone, created_at, updated_at)
            SELECT %(prefix)s || lpad(g::text, %(digits)s, '0'),
                   'r' || g || '@bench.example', '', 'en', 'UTC', now(), now()
              FROM generate_series(%(first)s::int, %(count)s::int) g
            ON CONFLICT (user_id) DO NOTHING
            """,
            {"prefix": prefix, "digits": DIGITS, "first": first, "count": count},
        )
        added = cursor.rowcount
        # Consent on every channel, as a signup checkbox records it.
        cursor.execute(
            f"""
            INSERT INTO {ConsentRecord._meta.db_table}
                (recipient_id, category_id, channel, granted, source, text_version,
                 ip_address, user_agent, reason, created_at)
            SELECT r.id, %(category)s::bigint, '', true, 'signup', 'bench', NULL, '', '', now()
              FROM {recipients} r
             WHERE r.user_id LIKE %(like)s
               AND NOT EXISTS (SELECT 1 FROM {ConsentRecord._meta.db_table} c
                                WHERE c.recipient_id = r.id)
            """,
            {"like": like, "category": consent_category},
        )
        # start = end is "no quiet hours": the default window (21:00-09:00) would defer
        # every campaign delivery for half of the day.
        cursor.execute(
            f"""
            INSERT INTO {QuietHours._meta.db_table} (recipient_id, start, "end")
            SELECT r.id, '00:00', '00:00' FROM {recipients} r WHERE r.user_id LIKE %(like)s
            ON CONFLICT (recipient_id) DO NOTHING
            """,
            {"like": like},
        )
    if exactly:
        # Rare (a smaller count than an earlier run); the ORM follows the cascades, in
        # chunks: its IN lists must stay under the 65,535 parameters a statement can bind.
        extra = Recipient.objects.filter(
            user_id__startswith=prefix, user_id__gt=user_id(count, prefix)
        )
        while ids := list(extra.values_list("pk", flat=True)[:10_000]):
            Recipient.objects.filter(pk__in=ids).delete()
    # Statistics, as autovacuum would soon have them: without them the planner guesses a
    # handful of recipients, and the fan-out's audience query took 23 s instead of 0.7 s
    # for 20,000 (measured); that is a fresh bulk import, not the steady state.
    with connection.cursor() as cursor:
        for model in (Recipient, ConsentRecord, QuietHours):
            cursor.execute(f"ANALYZE {model._meta.db_table}")
    return max(added, 0)


def campaign_reset(bench: Bench) -> None:
    """Empty the notification tables (bench.reset_data), drop the bench's campaigns and
    the daily marketing counters, so every run starts from the same state."""
    from django.db import connection

    from campaigns.models import Campaign
    from preferences.models import MarketingDayCount

    bench.reset_data()
    guard_database(bench)
    Campaign.objects.filter(name__startswith=BENCH_CAMPAIGN_NAME).delete()
    with connection.cursor() as cursor:
        # The cap (3 a day) would suppress every run's campaign after the third.
        cursor.execute(f"TRUNCATE {MarketingDayCount._meta.db_table}")
    bench.close_db()
