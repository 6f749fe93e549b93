"""One rendered sample per locale of a campaign's audience and channel, for the estimate
before launch (campaigns/estimate.py): what a member of that locale sees, with the
template locale it falls back to, or why nothing renders."""

from __future__ import annotations

from dataclasses import asdict, dataclass

from django.db import connection
from django.template import TemplateSyntaxError

from campaigns.audience import RECIPIENTS, audience_sql
from campaigns.models import Campaign
from notify.models import Notification, Recipient
from preferences.gate import channels_for
from templates_admin.models import Template
from templates_admin.rendering import recipient_context, render_version
from templates_admin.selectors import published_version_pick

# Samples are rendered for the audience's most common languages, this many at most.
SAMPLE_LOCALES_MAX = 10


@dataclass(frozen=True)
class Sample:
    """What a member with this locale sees on this channel (or why nothing renders)."""

    locale: str
    channel: str
    template_locale: str
    rendered: dict[str, str]
    problem: str = ""


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
