"""Reads of campaigns: progress, where every audience member is counted exactly once."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django.db import connection
from django.utils import timezone

from campaigns.models import Campaign, CampaignStatus
from deliveries.models import (
    AttemptOutcome,
    Delivery,
    DeliveryAttempt,
    DeliveryStatus,
    ProviderEvent,
    Reason,
)
from notify.models import Notification

NOTIFICATIONS = Notification._meta.db_table
DELIVERIES = Delivery._meta.db_table
PROVIDER_EVENTS = ProviderEvent._meta.db_table
ATTEMPTS = DeliveryAttempt._meta.db_table


def campaign_notifications_sql(alias: str = "n") -> str:
    """WHERE condition on notification `alias` for the campaign's notifications
    (params `c_producer`, `c_like`); the second LIKE lets the partial index serve it."""
    return (
        f"{alias}.producer_id = %(c_producer)s AND {alias}.event_id LIKE %(c_like)s "
        f"AND {alias}.event_id LIKE 'campaign:%%'"
    )


def campaign_params(campaign: Campaign) -> dict[str, Any]:
    """The parameters `campaign_notifications_sql` and the control statements use."""
    return {
        "c_producer": campaign.producer_id,
        "c_like": campaign.event_id_prefix + "%",
        "c_campaign": campaign.pk,
        "c_now": timezone.now(),
    }


# A member with several deliveries (one per channel) is counted under the first of these
# that any of its deliveries has: reached them somewhere, still on its way, held back,
# and only then how it ended.
MEMBER_ORDER = (
    DeliveryStatus.REACHED,
    DeliveryStatus.DELIVERED,
    DeliveryStatus.DIGESTED,
    DeliveryStatus.SENDING,
    DeliveryStatus.RETRYING,
    DeliveryStatus.QUEUED,
    DeliveryStatus.DIGESTING,
    DeliveryStatus.DEFERRED,
    DeliveryStatus.CANCELLED,
    DeliveryStatus.SKIPPED_LIVE,
    DeliveryStatus.SKIPPED_READ,
    DeliveryStatus.SUPERSEDED,
    DeliveryStatus.FAILED,
    DeliveryStatus.DEAD,
    DeliveryStatus.EXPIRED,
    DeliveryStatus.SUPPRESSED,
)
NOT_CREATED = "not_created"  # the fan-out has not reached them (yet)
NOT_ROUTED = "not_routed"  # a notification without deliveries yet


@dataclass(frozen=True)
class Progress:
    """How far a campaign has come.

    `members` counts each audience member under exactly one status and sums to
    `audience_size` (a cancelled campaign counts those it never reached as cancelled);
    `deliveries` counts delivery rows by (status, reason).
    """

    audience_size: int
    created: int
    members: dict[str, int] = field(default_factory=dict)
    deliveries: list[tuple[str, str, int]] = field(default_factory=list)
    # The email provider's word on the emails it accepted (see `EMAIL_FEEDBACK`).
    email: dict[str, int] = field(default_factory=dict)
    # The messages each provider took, by the provider of the try that sent them (a
    # channel may fail over between several): {"postmark": 980, "smtp": 20}.
    providers: dict[str, int] = field(default_factory=dict)


# Each email the provider accepted is counted under the furthest thing it told us about
# it, the first of these that applies, so the counts add up to `accepted`: the person
# complained, it bounced hard, it was opened (or clicked), it was delivered to the
# mailbox, or no word yet (`accepted_only`). Opens are never required: a delivered email
# that nobody opened is `delivered`.
EMAIL_FEEDBACK = ("complained", "bounced", "opened", "delivered", "accepted_only")


def campaign_progress(campaign: Campaign) -> Progress:
    """The campaign's progress, read in one aggregate query."""
    order = [status.value for status in MEMBER_ORDER]
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            WITH n AS (
                SELECT n.id FROM {NOTIFICATIONS} n WHERE {campaign_notifications_sql()}
            ), d AS (
                SELECT d.notification_id, d.status, d.reason
                  FROM {DELIVERIES} d JOIN n ON n.id = d.notification_id
            ), m AS (
                SELECT min(array_position(%(order)s::text[], d.status)) AS rank
                  FROM n LEFT JOIN d ON d.notification_id = n.id
                 GROUP BY n.id
            )
            SELECT 'd', status, reason, count(*) FROM d GROUP BY status, reason
            UNION ALL
            SELECT 'm', coalesce((%(order)s::text[])[rank], %(not_routed)s), '', count(*)
              FROM m GROUP BY rank
            """,
            {**campaign_params(campaign), "order": order, "not_routed": NOT_ROUTED},
        )
        rows = cursor.fetchall()
    members: dict[str, int] = {}
    deliveries: list[tuple[str, str, int]] = []
    for kind, status, reason, count in rows:
        if kind == "d":
            deliveries.append((status, reason, count))
        else:
            members[status] = members.get(status, 0) + count
    created = sum(members.values())
    audience = max(campaign.audience_size or 0, created)
    if audience > created:
        members[NOT_CREATED] = audience - created
    if campaign.status == CampaignStatus.CANCELLED:
        # Never to be created or routed: cancelled with the campaign.
        for name in (NOT_CREATED, NOT_ROUTED):
            if name in members:
                members[DeliveryStatus.CANCELLED.value] = members.get(
                    DeliveryStatus.CANCELLED.value, 0
                ) + members.pop(name)
    return Progress(
        audience_size=audience,
        created=created,
        members=dict(sorted(members.items())),
        deliveries=sorted(deliveries),
        email=campaign_email_feedback(campaign),
        providers=campaign_providers(campaign),
    )


def campaign_providers(campaign: Campaign) -> dict[str, int]:
    """How many of the campaign's messages each provider took (the provider of each
    delivered try), read in one aggregate query."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            SELECT a.provider, count(*) FROM {ATTEMPTS} a
              JOIN {DELIVERIES} d ON d.id = a.delivery_id AND d.accepted_at = a.accepted_at
              JOIN {NOTIFICATIONS} n ON n.id = d.notification_id
             WHERE {campaign_notifications_sql()} AND a.outcome = %(delivered)s
               AND a.provider <> ''
             GROUP BY a.provider
            """,
            {**campaign_params(campaign), "delivered": AttemptOutcome.DELIVERED.value},
        )
        return dict(sorted(cursor.fetchall()))


def campaign_email_feedback(campaign: Campaign) -> dict[str, int]:
    """How the campaign's emails fared after the provider accepted them (`EMAIL_FEEDBACK`),
    with `accepted` their total, read in one aggregate query."""
    accepted = [DeliveryStatus.DELIVERED.value, DeliveryStatus.REACHED.value]
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            WITH d AS (
                SELECT d.id, d.status, d.reason FROM {DELIVERIES} d
                  JOIN {NOTIFICATIONS} n ON n.id = d.notification_id
                 WHERE {campaign_notifications_sql()} AND d.channel = 'email'
                   AND (d.status = ANY(%(accepted)s) OR d.reason = %(bounced)s)
            )
            SELECT class, count(*) FROM (
            SELECT CASE
                     WHEN bool_or(e.kind = 'complained') THEN 'complained'
                     WHEN d.reason = %(bounced)s OR bool_or(e.kind = 'bounced' AND e.hard)
                       THEN 'bounced'
                     WHEN bool_or(e.kind IN ('opened', 'clicked')) THEN 'opened'
                     WHEN d.status = %(reached)s OR bool_or(e.kind = 'delivered')
                       THEN 'delivered'
                     ELSE 'accepted_only' END AS class
              FROM d LEFT JOIN {PROVIDER_EVENTS} e ON e.delivery_id = d.id
             GROUP BY d.id, d.status, d.reason
            ) per_email GROUP BY class
            """,
            {
                **campaign_params(campaign),
                "accepted": accepted,
                "bounced": Reason.BOUNCED.value,
                "reached": DeliveryStatus.REACHED.value,
            },
        )
        rows = cursor.fetchall()
    counts = dict.fromkeys(EMAIL_FEEDBACK, 0)
    counts.update(rows)
    return {"accepted": sum(counts.values()), **counts}
