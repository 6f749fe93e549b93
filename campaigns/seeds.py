"""Seed lists: a template draft, or a campaign that has not started, sent as a test email
to a named group of colleagues before any real recipient sees it.

Each member gets the email a recipient would get, "[Test] " before its subject, sent in
the admin's request through the email channel with a transient delivery (deliveries'
`test_emails_send`, the same way as "Send test to me"): nothing is written — no
notification, delivery or attempt — so a seed send is never in a campaign's progress or
report, the metrics, the analytics or any producer's list, and the gate is not asked.

A draft is rendered with its category's first sample payload (an empty payload when the
category has none), in the template's locale. A campaign is rendered with its own payload
(what its audience will get), through its category's published email template in the
locale the sender picks.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.core.exceptions import ValidationError
from django.core.validators import validate_email

from campaigns.models import SEED_LIST_MAX_MEMBERS, Campaign, CampaignStatus, SeedList
from deliveries.models import AttemptOutcome
from deliveries.support.send_to_me import result_words, test_emails_send
from notify.models import Category, Channel
from templates_admin.models import Template, TemplateVersion

SEND_PERMISSION = "campaigns.send_to_seed_list"


class SeedSendRefused(Exception):
    """Nothing was sent; the message says why, in words the staff member can act on."""


@dataclass(frozen=True)
class SeedSend:
    """What a seed send did: the addresses the relay or provider took, and the others
    with the reason each was refused."""

    seed_list: str
    sent: list[str]
    refused: list[tuple[str, str]]

    def summary(self) -> str:
        text = f"Test email sent to {len(self.sent)} of seed list {self.seed_list!r}."
        if self.refused:
            text += " Not sent: " + "; ".join(f"{a} ({why})" for a, why in self.refused) + "."
        return text


def seed_addresses_clean(text: str) -> list[str]:
    """The addresses of a seed list as typed (one a line; blank lines and repeats, case
    aside, dropped); ValidationError naming the first bad one, or when there are more than
    SEED_LIST_MAX_MEMBERS."""
    addresses: list[str] = []
    seen: set[str] = set()
    for line in text.splitlines():
        address = line.strip()
        if not address or address.lower() in seen:
            continue
        try:
            validate_email(address)
        except ValidationError:
            raise ValidationError(f"{address!r} is not an email address.") from None
        seen.add(address.lower())
        addresses.append(address)
    if len(addresses) > SEED_LIST_MAX_MEMBERS:
        raise ValidationError(
            f"A seed list holds at most {SEED_LIST_MAX_MEMBERS} addresses ({len(addresses)} given)."
        )
    return addresses


def seed_payload(category: Category) -> dict[str, Any]:
    """What a draft is rendered with: the category's first sample payload, or nothing."""
    samples = category.sample_payloads or []
    return dict(samples[0]) if samples else {}


def campaign_before_launch(campaign: Campaign) -> bool:
    """True while the campaign is scheduled and its fan-out has made no notification."""
    return (
        campaign.status == CampaignStatus.SCHEDULED
        and campaign.created_count == 0
        and campaign.fanned_out_at is None
    )


def campaign_seed_locales(campaign: Campaign) -> list[str]:
    """The locales in which the campaign's category has a published email template."""
    return list(
        Template.objects.filter(
            category_id=campaign.category_id,
            channel=Channel.EMAIL,
            published_version__isnull=False,
        )
        .order_by("locale")
        .values_list("locale", flat=True)
    )


def version_seed_send(
    *, seed_list: SeedList, version: TemplateVersion, requested_by: AbstractBaseUser
) -> SeedSend:
    """Send a template version (a draft too) to every member of the seed list."""
    template = version.template
    if template.channel != Channel.EMAIL:
        raise SeedSendRefused(f"Seed lists receive email; this is a {template.channel} template.")
    return _send(
        seed_list=seed_list,
        version=version,
        payload=seed_payload(template.category),
        locale=template.locale,
        requested_by=requested_by,
    )


def campaign_seed_send(
    *, seed_list: SeedList, campaign: Campaign, locale: str, requested_by: AbstractBaseUser
) -> SeedSend:
    """Send the campaign, as its audience will get it by email in `locale`, to every
    member of the seed list; only before it starts."""
    if not campaign_before_launch(campaign):
        raise SeedSendRefused("This campaign has started: seed sends are for before it starts.")
    template = (
        Template.objects.select_related("category", "published_version")
        .filter(category_id=campaign.category_id, channel=Channel.EMAIL, locale=locale)
        .first()
    )
    if template is None or template.published_version is None:
        raise SeedSendRefused(
            f"{campaign.category.key} has no published email template in {locale!r}."
        )
    version = template.published_version
    version.template = template  # rendered under its template's category and locale
    return _send(
        seed_list=seed_list,
        version=version,
        payload=campaign.payload,
        locale=locale,
        requested_by=requested_by,
    )


def _send(
    *,
    seed_list: SeedList,
    version: TemplateVersion,
    payload: dict[str, Any],
    locale: str,
    requested_by: AbstractBaseUser,
) -> SeedSend:
    if Channel.EMAIL not in settings.NOTIFY_CHANNELS_ENABLED:
        raise SeedSendRefused("The email channel is not enabled on this platform.")
    if not seed_list.addresses:
        raise SeedSendRefused(f"Seed list {seed_list.name!r} has no addresses.")
    answers = test_emails_send(
        version=version,
        payload=payload,
        locale=locale,
        addresses=seed_list.addresses[:SEED_LIST_MAX_MEMBERS],
        requested_by=requested_by,
    )
    delivered = AttemptOutcome.DELIVERED
    return SeedSend(
        seed_list=seed_list.name,
        sent=[address for address, result in answers if result.outcome == delivered],
        refused=[
            (address, result_words(result))
            for address, result in answers
            if result.outcome != delivered
        ],
    )
