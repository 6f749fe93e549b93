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
  With a rate too, the members who share a moment (one zone's 10:00) take turns at the
  rate from it, and the moments are served in time order: a moment's turns start at it,
  or when the turns of the moments before it end (`local_slots_plan`), so the campaign
  as a whole keeps its rate. The plan is made from the audience's counts per moment by
  the first batch and kept on the campaign row (`Campaign.local_slots`) with how many
  turns each moment gave, so the batches after it continue the same schedule.

NOTIFY_CAMPAIGN_TIME_SCALE divides the wait until a person's local time (1 in
production), so a test can see three zones' 10:00 in seconds.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from datetime import datetime, time, timedelta
from typing import Any

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


def local_moment(
    *,
    zone: str,
    quiet: tuple[time, time] | None,
    local_time: time,
    start: datetime,
    default_window: QuietWindow,
) -> datetime:
    """The release instant of a member in `zone` with `quiet` hours (None: the default
    window) of a campaign at `local_time` that started at `start`."""
    window = QuietWindow(*quiet) if quiet is not None else default_window
    scheduled = campaign_send_at(
        recipient=Recipient(timezone=zone), local_time=local_time, quiet_window=window, now=start
    )
    return campaign_release_at(scheduled=scheduled, start=start)


def local_moments(
    *, campaign: Campaign, start: datetime, until: int | None = None
) -> Counter[datetime]:
    """How many of the audience (up to recipient id `until`, if given) share each release
    instant of a local-time campaign started at `start` (one grouped query: a moment
    depends only on a member's zone and quiet hours)."""
    condition, params = audience_sql(campaign)
    bound = "" if until is None else "AND r.id <= %(until)s"
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            SELECT r.timezone, q.start, q."end", count(*)
              FROM {RECIPIENTS} r
              LEFT JOIN {QuietHours._meta.db_table} q ON q.recipient_id = r.id
             WHERE {condition} {bound}
             GROUP BY 1, 2, 3
            """,
            {**params, "until": until},
        )
        rows = cursor.fetchall()
    default = default_quiet_window()
    moments: Counter[datetime] = Counter()
    for zone, quiet_start, quiet_end, count in rows:
        moments[_person_moment(campaign, zone, quiet_start, quiet_end, start, default)] += count
    return moments


def _person_moment(
    campaign: Campaign,
    zone: str,
    quiet_start: time | None,
    quiet_end: time | None,
    start: datetime,
    default: QuietWindow,
) -> datetime:
    """When a person of this zone and quiet window gets the campaign (a row of the
    audience's query): their next local time, moved past their quiet hours."""
    quiet = (quiet_start, quiet_end) if quiet_start is not None else None
    return local_moment(
        zone=zone,
        quiet=quiet,
        local_time=campaign.local_time,
        start=start,
        default_window=default,
    )


def local_slots_plan(*, moments: Mapping[datetime, int], rate: float) -> dict[str, list[Any]]:
    """The turns of a local-time campaign at `rate`: for each release instant, in time
    order, when its first member goes (at it, or once the members of the instants before
    it had their turns) and how many turns it gave so far (0). JSON, keyed by the
    instant's ISO form, as `Campaign.local_slots` keeps it."""
    plan: dict[str, list[Any]] = {}
    free: datetime | None = None
    for moment in sorted(moments):
        first = moment if free is None else max(moment, free)
        plan[moment.isoformat()] = [first.isoformat(), 0]
        free = first + timedelta(seconds=moments[moment] / rate)
    return plan


def local_turn_take(
    *, slots: dict[str, list[Any]], moment: datetime, rate: float, turns: int = 1
) -> datetime:
    """When the next member released at `moment` goes: its first turn plus one step of
    1/rate for each turn the moment already gave; `turns` are taken (an estimate on a
    sample takes a sampled member's share). A moment not in the plan (the member moved
    zone since the first batch) starts its turns at itself."""
    first, taken = slots.setdefault(moment.isoformat(), [moment.isoformat(), 0])
    slots[moment.isoformat()][1] = taken + turns
    return datetime.fromisoformat(first) + timedelta(seconds=taken / rate)


def local_slots_last(
    *, slots: Mapping[str, list[Any]], moments: Mapping[datetime, int], rate: float
) -> datetime | None:
    """When the last member of a plan goes (None: an empty plan)."""
    ends = [
        datetime.fromisoformat(slots[m.isoformat()][0]) + timedelta(seconds=(n - 1) / rate)
        for m, n in moments.items()
        if n
    ]
    return max(ends, default=None)


def local_campaign_rate(campaign: Campaign) -> float | None:
    """The rate a local-time campaign's members who share a moment take turns at (None:
    no rate asked for: they are all released at their moment)."""
    channels = campaign.category.default_channels
    return campaign_pace(requested=campaign.send_rate, channels=channels)


def batch_local_dues(
    *, campaign: Campaign, limit: int, now: datetime
) -> tuple[list[int], list[datetime]]:
    """(recipient ids, due times) of the next fan-out batch of a local-time campaign: the
    same members the batch takes (after the checkpoint, up to the fixed audience, in id
    order), each due at `campaign_send_at` from the campaign's start (one query), or with
    a rate at their turn of that moment; the turns taken are added to
    `campaign.local_slots` (the caller stores it with the batch)."""
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
    rate = local_campaign_rate(campaign)
    default = default_quiet_window()
    ids, dues = [], []
    for pk, zone, quiet_start, quiet_end in rows:
        moment = _person_moment(campaign, zone, quiet_start, quiet_end, start, default)
        if rate is not None:
            moment = local_turn_take(slots=campaign.local_slots, moment=moment, rate=rate)
        ids.append(pk)
        dues.append(moment)
    return ids, dues


def campaign_paced_at(*, start: datetime, index: int, rate: float) -> datetime:
    """When the member at `index` (0-based, recipient order) of a paced campaign is due."""
    return start + timedelta(seconds=index / rate)
