"""A campaign's estimate before launch: what the gate would decide for each member, how
long the sending would take, and what a member sees in each of the audience's languages.

Nothing is written: the gate is asked in its dry-run form (the daily cap is read, not
counted), each member at the moment the campaign's pacing would release them
(campaigns/pacing.py), and the hard-bounce list is read as routing reads it. So the
counts are the gate's own rules, not a copy of them; they differ from what the campaign
then does only by what changes in between (people's choices, the cap's count, bounces).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from datetime import datetime

from django.conf import settings
from django.db import connection
from django.db.models import Q
from django.template import TemplateSyntaxError
from django.utils import timezone

from campaigns.audience import RECIPIENTS, audience_sql
from campaigns.models import Campaign
from campaigns.pacing import (
    campaign_pace,
    campaign_paced_at,
    campaign_release_at,
    campaign_send_at,
    provider_low_share,
)
from deliveries.models import AddressSuppression, Reason
from deliveries.pipeline.ratelimit import provider_for_channel
from deliveries.pipeline.suppression import suppression_key
from deliveries.selectors import push_targets_by_recipient
from notify.models import PUSH_CHANNELS, Category, Channel, Notification, Recipient
from preferences.gate import GateRequest, Verdict, channels_for, decide_deliveries_many
from preferences.selectors import QuietWindow, default_quiet_window
from templates_admin.models import Template
from templates_admin.rendering import recipient_context, render_version
from templates_admin.selectors import published_version_pick

# Members read and decided per round: one gate read, one device read and one bounce-list
# read each.
ESTIMATE_CHUNK = 1000
# Samples are rendered for the audience's most common languages, this many at most.
SAMPLE_LOCALES_MAX = 10


@dataclass(frozen=True)
class ChannelEstimate:
    """One channel's outcome over the audience: messages that go out at their time,
    those quiet hours hold until they end, and those held back, by reason."""

    channel: str
    send: int = 0
    deferred: int = 0
    suppressed: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class Sample:
    """What a member with this locale sees on this channel (or why nothing renders)."""

    locale: str
    channel: str
    template_locale: str
    rendered: dict[str, str]
    problem: str = ""


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
    decided, last_release = 0, now
    for chunk in _audience_chunks(campaign, every=every):
        releases = [
            _release_at(campaign, rate, (decided + i) * every, r, now) for i, r in enumerate(chunk)
        ]
        for decisions in _decided(chunk, category, channels, releases, now):
            for channel, outcome in decisions:
                counts[channel][outcome] += 1
        decided += len(chunk)
        last_release = max(last_release, *releases)
    scale = audience / decided if decided else 0.0

    def scaled(count: int) -> int:
        return round(count * scale)

    estimates = [
        ChannelEstimate(
            channel,
            send=scaled(c.pop("send", 0)),
            deferred=scaled(c.pop("deferred", 0)),
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


def _release_at(
    campaign: Campaign, rate: float | None, index: int, recipient: Recipient, now: datetime
) -> datetime:
    """When the member at `index` would be released to routing (the gate decides then)."""
    if campaign.local_time is not None:
        own = getattr(recipient, "quiet_hours", None)
        window = QuietWindow(own.start, own.end) if own else default_quiet_window()
        scheduled = campaign_send_at(
            recipient=recipient, local_time=campaign.local_time, quiet_window=window, now=now
        )
        return campaign_release_at(scheduled=scheduled, start=now)
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
    `deferred`, or the reason it is held back."""
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
    answers = []
    for decisions in decide_deliveries_many(requests, now=now, dry_run=True):
        outcomes = []
        for d in decisions:
            if d.allowed and suppression_key(channel=d.channel, address=d.target) in listed:
                outcomes.append((d.channel, Reason.ADDRESS_SUPPRESSED.value))
            elif d.allowed:
                outcomes.append((d.channel, "send"))
            elif d.status == Verdict.DEFER:
                outcomes.append((d.channel, "deferred"))
            else:
                outcomes.append((d.channel, str(d.reason)))
        answers.append(outcomes)
    return answers


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


def campaign_samples(*, campaign: Campaign) -> list[Sample]:
    """The campaign's payload rendered for each of the audience's most common locales on
    each of its channels, with the template a member of that locale gets (its fallback)."""
    condition, params = audience_sql(campaign)
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT r.locale FROM {RECIPIENTS} r WHERE {condition} "
            "GROUP BY r.locale ORDER BY count(*) DESC, r.locale LIMIT %(most)s",
            {**params, "most": SAMPLE_LOCALES_MAX},
        )
        locales = [row[0] for row in cursor.fetchall()]
    channels = channels_for(Notification(category=campaign.category, channels=None))
    published = {
        channel: list(
            Template.objects.filter(
                category_id=campaign.category_id,
                channel=channel,
                published_version__isnull=False,
            ).values_list("locale", "published_version_id")
        )
        for channel in channels
    }
    samples = []
    for locale in locales:
        for channel in channels:
            version = published_version_pick(published[channel], locale=locale)
            if version is None:
                samples.append(Sample(locale, channel, "", {}, "No published template."))
                continue
            person = Recipient(user_id="sample", locale=locale, timezone="UTC")
            try:
                message = render_version(version, recipient_context(campaign.payload, person))
            except TemplateSyntaxError as error:  # a render past its bounds, as at send
                samples.append(Sample(locale, channel, version.template.locale, {}, str(error)))
                continue
            rendered = {k: v for k, v in asdict(message).items() if v}
            samples.append(Sample(locale, channel, version.template.locale, rendered))
    return samples
