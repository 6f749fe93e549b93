"""Campaign pacing: when each member of a campaign is released to routing.

A campaign's members are not held in a worker: each one's outbox row is written by the
fan-out with its own due time, and the outbox relay publishes a row only once it is due
(as it does for a scheduled notification). A worker or relay killed meanwhile strands
nothing: the rows wait in PostgreSQL. Two schedules:

- a **send rate**: member i (in recipient order) is due `i / rate` seconds after the
  first batch, the rate being at most the low class's share of each provider bucket the
  category's channels use (`campaign_pace`), so released work never waits in the broker
  for tokens and transactional traffic keeps the reserve;
- **local time**: each member at the campaign's wall-clock time in their own zone, the
  next such moment within 24 h, moved to the end of their quiet hours when it falls
  inside them (`campaign_send_at`). The gate still decides at routing: quiet hours win.

NOTIFY_CAMPAIGN_TIME_SCALE divides the wait until a person's local time (1 in
production), so a test can see three zones' 10:00 in seconds.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, time, timedelta

from django.conf import settings
from django.db import connection

from campaigns.audience import RECIPIENTS, audience_sql
from campaigns.models import Campaign
from deliveries.pipeline.ratelimit import provider_for_channel, provider_limit
from notify.models import Recipient
from preferences.models import QuietHours
from preferences.selectors import QuietWindow, default_quiet_window, quiet_until, recipient_zone


def provider_low_share(*, channel: str) -> float | None:
    """Messages a second the low class may take of the channel's provider bucket: its
    rate less NOTIFY_LOW_PRIORITY_RESERVE, which transactional traffic keeps (None: the
    channel is not rate limited, e.g. in-app)."""
    provider = provider_for_channel(channel)
    if provider is None:
        return None
    rate, _burst = provider_limit(provider)
    return rate * max(0.0, 1.0 - settings.NOTIFY_LOW_PRIORITY_RESERVE)


def campaign_pace(*, requested: float | None, channels: Iterable[str]) -> float | None:
    """The rate (members a second) a campaign's members are released at: the requested
    rate, at most the low share of the slowest provider among `channels` (each member
    sends at most one message a channel). None: unpaced (no rate was asked for)."""
    if requested is None:
        return None
    shares = [s for c in channels if (s := provider_low_share(channel=c)) is not None]
    return min([requested, *shares])


def campaign_send_at(
    *, recipient: Recipient, local_time: time, quiet_window: QuietWindow, now: datetime
) -> datetime:
    """When a member of a local-time campaign is due: the next `local_time` in their zone
    at or after `now` (so within 24 h), or the end of their quiet window if that moment
    falls inside it."""
    zone = recipient_zone(recipient)
    local_now = now.astimezone(zone)
    at = datetime.combine(local_now.date(), local_time, tzinfo=zone)
    if at < local_now:
        at = datetime.combine(local_now.date() + timedelta(days=1), local_time, tzinfo=zone)
    return quiet_until(recipient=recipient, now=at, window=quiet_window) or at


def campaign_release_at(*, scheduled: datetime, start: datetime) -> datetime:
    """The real moment a member scheduled for `scheduled` is released: the wait from the
    campaign's `start` divided by NOTIFY_CAMPAIGN_TIME_SCALE (1 in production: as is)."""
    scale = settings.NOTIFY_CAMPAIGN_TIME_SCALE
    if scale == 1 or scheduled <= start:
        return scheduled
    return start + (scheduled - start) / scale


def batch_local_dues(
    *, campaign: Campaign, limit: int, now: datetime
) -> tuple[list[int], list[datetime]]:
    """(recipient ids, due times) of the next fan-out batch of a local-time campaign: the
    same members the batch takes (after the checkpoint, up to the fixed audience, in id
    order), each due at `campaign_send_at` from the campaign's start (one query)."""
    condition, params = audience_sql(campaign)
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            SELECT r.id, r.timezone, q.start, q."end"
              FROM {RECIPIENTS} r
              LEFT JOIN {QuietHours._meta.db_table} q ON q.recipient_id = r.id
             WHERE r.id > %(checkpoint)s AND r.id <= %(until)s AND {condition}
             ORDER BY r.id
             LIMIT %(limit)s
            """,
            {
                **params,
                "checkpoint": campaign.checkpoint,
                "until": campaign.audience_until,
                "limit": limit,
            },
        )
        rows = cursor.fetchall()
    start = campaign.paced_from or now
    default = default_quiet_window()
    ids, dues = [], []
    for pk, zone, quiet_start, quiet_end in rows:
        window = QuietWindow(quiet_start, quiet_end) if quiet_start is not None else default
        scheduled = campaign_send_at(
            recipient=Recipient(pk=pk, timezone=zone),
            local_time=campaign.local_time,
            quiet_window=window,
            now=start,
        )
        ids.append(pk)
        dues.append(campaign_release_at(scheduled=scheduled, start=start))
    return ids, dues


def campaign_paced_at(*, start: datetime, index: int, rate: float) -> datetime:
    """When the member at `index` (0-based, recipient order) of a paced campaign is due."""
    return start + timedelta(seconds=index / rate)
