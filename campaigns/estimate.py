"""A campaign's estimate before launch: what the gate would decide for each member, how
long the sending would take, and what a member sees in each of the audience's languages.

Nothing is written: the gate is asked in its dry-run form (the daily cap is read, not
counted), each member at the moment the campaign's pacing would release them
(campaigns/pacing.py), and the hard-bounce list is read as routing reads it. What routing
does after the gate is asked of routing's own rules too: whether the delivery would be
gathered into a digest or delayed until its in-app entry is read (`digest_window_seconds`,
`unread_delay_seconds`; a campaign's notifications are never, so both stay 0), and
whether it would end `expired`: a quiet-hours wait that outlasts its deadline (the
release ends it so), or a wait for the provider's campaign share longer than the
deadline (an unpaced audience larger than the share carries in that time; the sender
ends it so). So the counts are routing's own rules, not a copy of them; they differ from
what the campaign then does only by what changes in between (people's choices, the
cap's count, bounces).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta

from django.conf import settings
from django.db import connection
from django.db.models import Q
from django.utils import timezone

from campaigns.audience import RECIPIENTS, audience_sql
from campaigns.models import Campaign
from campaigns.pacing import (
    campaign_pace,
    campaign_paced_at,
    campaign_release_at,
    campaign_send_at,
    local_moments,
    local_slots_last,
    local_slots_plan,
    local_turn_take,
    provider_low_share,
)
from campaigns.samples import Sample, campaign_samples
from deliveries.models import AddressSuppression, Reason
from deliveries.pipeline.digests import digest_window_seconds, unread_delay_seconds
from deliveries.pipeline.ratelimit import provider_for_channel
from deliveries.pipeline.suppression import suppression_key
from deliveries.selectors import push_targets_by_recipient
from notify.deadlines import deadline_seconds
from notify.models import PUSH_CHANNELS, Category, Channel, Notification, Recipient
from preferences.gate import GateRequest, Verdict, channels_for, decide_deliveries_many
from preferences.selectors import QuietWindow, default_quiet_window

# Members read and decided per round: one gate read, one device read and one bounce-list
# read each.
ESTIMATE_CHUNK = 1000
# People named as examples of those whose message would expire, per channel: enough to
# look them up, not a listing.
EXPIRED_EXAMPLES_MAX = 10
# Outcomes routing gives a delivery the gate let through, besides `send`.
DIGESTED, DELAYED, EXPIRED = "digested", "delayed", "expired"


@dataclass(frozen=True)
class ChannelEstimate:
    """One channel's outcome over the audience: messages that go out at their time,
    those quiet hours hold until they end, those gathered into a digest or delayed until
    read, those that would end `expired` (with some of whom), and those held back, by
    reason."""

    channel: str
    send: int = 0
    deferred: int = 0
    digested: int = 0
    delayed: int = 0
    expired: int = 0
    expired_examples: list[str] = field(default_factory=list)
    suppressed: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class CampaignEstimate:
    audience: int
    decided: int  # members the gate was asked about: all, or an even sample of them
    channels: list[ChannelEstimate]
    rate: float | None  # members released a second (None: unpaced)
    duration_seconds: float
    samples: list[Sample]

    def as_document(self) -> dict:
        """The estimate as the API returns it."""
        return asdict(self)


def campaign_estimate(*, campaign: Campaign, now: datetime | None = None) -> CampaignEstimate:
    """What `campaign` (stored or not; nothing of it is written) would do if it started
    now: per channel, how many messages go out, wait for quiet hours to end, or are held
    back and why; how long its sending takes at its pace and the providers' low share;
    and one rendered sample per (audience locale, channel).

    An audience over NOTIFY_CAMPAIGN_ESTIMATE_MEMBERS is decided on an even sample of
    about that many members (every k-th recipient id) and the counts scaled to it.
    """
    now = now or timezone.now()
    category = campaign.category
    channels = channels_for(Notification(category=category, channels=None))
    rate = campaign_pace(requested=campaign.send_rate, channels=channels)
    audience = _audience_size(campaign)
    every = max(1, math.ceil(audience / settings.NOTIFY_CAMPAIGN_ESTIMATE_MEMBERS))
    counts: dict[str, Counter] = {channel: Counter() for channel in channels}
    sends: dict[str, list[tuple[datetime, str]]] = {channel: [] for channel in channels}
    examples: dict[str, list[str]] = {channel: [] for channel in channels}
    slots = _local_plan(campaign, rate, now)
    decided, last_release = 0, now
    for chunk in _audience_chunks(campaign, every=every):
        releases = [
            _release_at(campaign, rate, (decided + i) * every, r, now, slots, every)
            for i, r in enumerate(chunk)
        ]
        decided_chunk = _decided(chunk, category, channels, releases, now)
        for person, at, decisions in zip(chunk, releases, decided_chunk, strict=True):
            for channel, outcome in decisions:
                counts[channel][outcome] += 1
                if outcome == "send":
                    sends[channel].append((at, person.user_id))
                elif outcome == EXPIRED and len(examples[channel]) < EXPIRED_EXAMPLES_MAX:
                    examples[channel].append(person.user_id)
        decided += len(chunk)
        last_release = max(last_release, *releases)
    if slots is not None and rate is not None:
        moments, plan = slots
        last = local_slots_last(slots=plan, moments=moments, rate=rate)
        last_release = max(last_release, last or now)
    _expired_waiting(sends, counts, examples, category, every)
    scale = audience / decided if decided else 0.0

    def scaled(count: int) -> int:
        return round(count * scale)

    estimates = [
        ChannelEstimate(
            channel,
            send=scaled(c.pop("send", 0)),
            deferred=scaled(c.pop("deferred", 0)),
            digested=scaled(c.pop(DIGESTED, 0)),
            delayed=scaled(c.pop(DELAYED, 0)),
            expired=scaled(c.pop(EXPIRED, 0)),
            expired_examples=examples[channel],
            suppressed={reason: scaled(n) for reason, n in sorted(c.items())},
        )
        for channel, c in counts.items()
    ]
    return CampaignEstimate(
        audience=audience,
        decided=decided,
        channels=estimates,
        rate=rate,
        duration_seconds=round(_duration(estimates, rate, audience, last_release, now), 1),
        samples=campaign_samples(campaign=campaign),
    )


def _audience_size(campaign: Campaign) -> int:
    condition, params = audience_sql(campaign)
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT count(*) FROM {RECIPIENTS} r WHERE {condition}", params)
        return cursor.fetchone()[0]


def _audience_chunks(campaign: Campaign, *, every: int) -> Iterator[list[Recipient]]:
    """The members (every `every`-th recipient id of them), in id order as the fan-out
    takes them, a chunk at a time, with their quiet hours."""
    condition, params = audience_sql(campaign)
    # A list of user ids given in the request is sent to the database once, not a chunk
    # at a time (it may be a hundred thousand long).
    limit = None if "a_user_ids" in params else ESTIMATE_CHUNK
    after = 0
    while True:
        with connection.cursor() as cursor:
            cursor.execute(
                f"SELECT r.id FROM {RECIPIENTS} r WHERE r.id > %(after)s AND {condition} "
                "AND mod(r.id, %(every)s) = 0 ORDER BY r.id LIMIT %(limit)s",
                {**params, "after": after, "every": every, "limit": limit},
            )
            ids = [row[0] for row in cursor.fetchall()]
        for start in range(0, len(ids), ESTIMATE_CHUNK):
            chunk = ids[start : start + ESTIMATE_CHUNK]
            yield list(
                Recipient.objects.filter(pk__in=chunk).select_related("quiet_hours").order_by("pk")
            )
        if limit is None or len(ids) < limit:
            return
        after = ids[-1]


def _local_plan(
    campaign: Campaign, rate: float | None, now: datetime
) -> tuple[Counter, dict] | None:
    """A local-time campaign with a rate: the audience's counts per moment and the turns
    planned from them, as the first fan-out batch makes them (None: not such a campaign)."""
    if campaign.local_time is None or rate is None:
        return None
    moments = local_moments(campaign=campaign, start=now)
    return moments, local_slots_plan(moments=moments, rate=rate)


def _release_at(
    campaign: Campaign,
    rate: float | None,
    index: int,
    recipient: Recipient,
    now: datetime,
    slots: tuple[Counter, dict] | None,
    every: int,
) -> datetime:
    """When the member at `index` would be released to routing (the gate decides then):
    a sampled member takes the turns of the `every` members it stands for."""
    if campaign.local_time is not None:
        own = getattr(recipient, "quiet_hours", None)
        window = QuietWindow(own.start, own.end) if own else default_quiet_window()
        scheduled = campaign_send_at(
            recipient=recipient, local_time=campaign.local_time, quiet_window=window, now=now
        )
        moment = campaign_release_at(scheduled=scheduled, start=now)
        if slots is None or rate is None:
            return moment
        return local_turn_take(slots=slots[1], moment=moment, rate=rate, turns=every)
    if rate is not None:
        return campaign_paced_at(start=now, index=index, rate=rate)
    return now


def _decided(
    chunk: list[Recipient],
    category: Category,
    channels: list[str],
    releases: list[datetime],
    now: datetime,
) -> list[list[tuple[str, str]]]:
    """Per member, (channel, outcome) of each delivery routing would make: `send`,
    `deferred`, `digested`, `delayed`, `expired` (a quiet-hours wait past its deadline),
    or the reason it is held back; in the order routing's `delivery_row` decides them."""
    push = [c for c in channels if c in PUSH_CHANNELS]
    devices = push_targets_by_recipient(recipient_ids=[r.pk for r in chunk], channels=push)
    requests = [
        GateRequest(
            Notification(recipient=r, category=category, channels=None),
            channels,
            devices.get(r.pk, {}),
            at=at,
        )
        for r, at in zip(chunk, releases, strict=True)
    ]
    listed = _bounced(chunk)
    ttl = {c: timedelta(seconds=_deadline(category, c)) for c in channels}
    answers = []
    verdicts = decide_deliveries_many(requests, now=now, dry_run=True)
    for request, decisions in zip(requests, verdicts, strict=True):
        # As the fan-out makes it: routing's rules read the campaign's event id.
        notification = Notification(
            category=category,
            event_id=f"campaign:estimate:{request.notification.recipient.user_id}",
        )
        outcomes = []
        for d in decisions:
            if d.allowed and suppression_key(channel=d.channel, address=d.target) in listed:
                outcomes.append((d.channel, Reason.ADDRESS_SUPPRESSED.value))
            elif (d.allowed or d.status == Verdict.DEFER) and digest_window_seconds(
                notification, d.channel
            ) is not None:
                outcomes.append((d.channel, DIGESTED))
            elif d.allowed and unread_delay_seconds(notification, d.channel) is not None:
                outcomes.append((d.channel, DELAYED))
            elif d.allowed:
                outcomes.append((d.channel, "send"))
            elif d.status == Verdict.DEFER and d.not_before >= request.at + ttl[d.channel]:
                outcomes.append((d.channel, EXPIRED))  # the quiet hours outlast its deadline
            elif d.status == Verdict.DEFER:
                outcomes.append((d.channel, "deferred"))
            else:
                outcomes.append((d.channel, str(d.reason)))
        answers.append(outcomes)
    return answers


def _deadline(category: Category, channel: str) -> int:
    """Seconds a campaign's delivery on `channel` stays worth sending, from its release
    (a campaign's notifications carry no TTL of their own)."""
    return deadline_seconds(
        channel=channel, notification_ttl=None, category_ttl=category.ttl_seconds
    )


def _expired_waiting(
    sends: dict[str, list[tuple[datetime, str]]],
    counts: dict[str, Counter],
    examples: dict[str, list[str]],
    category: Category,
    every: int,
) -> None:
    """Messages that would wait for the provider longer than their deadline: each
    channel's messages taken in release order at the campaigns' share of its bucket (a
    sampled one stands for `every`), those whose turn comes past their deadline moved
    from `send` to `expired` in `counts`, the first few of them added to `examples`.

    A paced campaign's rate is at most that share, so only an unpaced audience (or one
    local-time moment) larger than the share carries in a deadline expires so."""
    for channel, items in sends.items():
        share = provider_low_share(channel=channel)
        if not share:
            continue
        ttl = timedelta(seconds=_deadline(category, channel))
        step = timedelta(seconds=every / share)
        free: datetime | None = None
        for at, user_id in sorted(items):
            turn = at if free is None else max(at, free)
            free = turn + step
            if turn - at >= ttl:
                counts[channel]["send"] -= 1
                counts[channel][EXPIRED] += 1
                if len(examples[channel]) < EXPIRED_EXAMPLES_MAX:
                    examples[channel].append(user_id)


def _bounced(chunk: list[Recipient]) -> set[str]:
    """The members' addresses on the hard-bounce list, as `suppression_key` strings."""
    emails = [r.email.lower() for r in chunk if r.email]
    phones = [r.phone for r in chunk if r.phone]
    rows = AddressSuppression.objects.filter(
        Q(channel=Channel.EMAIL, address__in=emails) | Q(channel=Channel.SMS, address__in=phones)
    ).values_list("channel", "address")
    return {f"{channel}:{address}" for channel, address in rows}


def _duration(
    estimates: list[ChannelEstimate],
    rate: float | None,
    audience: int,
    last_release: datetime,
    now: datetime,
) -> float:
    """Seconds from the start to the last message: the release schedule's span, or, when
    longer, the messages each provider carries at the low class's share of its bucket."""
    span = (last_release - now).total_seconds()
    if rate is not None and audience:
        span = max(span, audience / rate)
    per_channel: Counter = Counter()
    for estimate in estimates:
        if provider_for_channel(estimate.channel) is not None:
            per_channel[estimate.channel] += estimate.send + estimate.deferred
    for channel, messages in per_channel.items():
        share = provider_low_share(channel=channel)
        if share:
            span = max(span, messages / share)
    return span
