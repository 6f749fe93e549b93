"""Writes of preferences and consent, one-click unsubscribe, quiet hours and a person's
settings (the daily cap is in daily_cap.py)."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, time

from django.conf import settings
from django.contrib.auth.base_user import AbstractBaseUser
from django.db import transaction
from django.utils import timezone

from analytics.person_events import analytics_unsubscribed_write
from notify.erasure import recipient_hold_lift
from notify.models import Category, Channel, Recipient
from notify.services import recipient_upsert
from preferences.models import (
    ConsentRecord,
    ConsentSource,
    Preference,
    QuietHours,
    SettingChange,
)
from preferences.selectors import consent_granted, quiet_window
from preferences.tokens import UnsubscribeScope

logger = logging.getLogger(__name__)


class MandatoryCategory(Exception):
    """Someone tried to turn off a mandatory category (login codes, payments)."""

    def __init__(self, category_key: str, channel: str) -> None:
        super().__init__(f"{category_key!r} is mandatory and cannot be turned off ({channel}).")
        self.category_key = category_key
        self.channel = channel


class UnknownCell(Exception):
    def __init__(self, message: str, field: str) -> None:
        super().__init__(message)
        self.field = field


@dataclass(frozen=True)
class RequestOrigin:
    """Where a change came from, for the consent record."""

    source: str
    text_version: str = ""
    ip_address: str | None = None
    user_agent: str = ""
    agent: AbstractBaseUser | None = None  # the support agent, for source `support`
    reason: str = ""


def _record(
    *, recipient: Recipient, category: Category | None, channel: str, granted: bool,
    origin: RequestOrigin,
) -> ConsentRecord:  # fmt: skip
    return ConsentRecord.objects.create(
        recipient=recipient,
        category=category,
        channel=channel,
        granted=granted,
        source=origin.source,
        text_version=origin.text_version or settings.NOTIFY_CONSENT_TEXT_VERSION,
        ip_address=origin.ip_address,
        user_agent=origin.user_agent[:500],
        agent=origin.agent,
        reason=origin.reason,
    )


def preferences_update(
    *, recipient: Recipient, cells: dict[str, dict[str, bool]], origin: RequestOrigin
) -> int:
    """Apply a partial preferences document; each changed cell writes its consent record
    in the same transaction. Returns how many cells changed.

    Raises MandatoryCategory (nothing changes) for an attempt to turn off a mandatory
    cell, and UnknownCell for an unknown category or channel. A recipient on erasure hold
    (registered again after an erasure) has every cell counted as off, so a cell granted
    now writes its consent record; that fresh consent lifts the hold.
    """
    categories = {c.key: c for c in Category.objects.filter(key__in=list(cells))}
    for key, channels in cells.items():
        category = categories.get(key)
        if category is None:
            raise UnknownCell(f"No category {key!r}.", field=f"categories.{key}")
        for channel, enabled in channels.items():
            if channel not in Channel.values:
                raise UnknownCell(f"No channel {channel!r}.", field=f"categories.{key}.{channel}")
            if category.mandatory and not enabled:
                raise MandatoryCategory(key, channel)
    changed = 0
    granted = False
    turned_off: list[tuple[int | None, str]] = []
    with transaction.atomic():
        # One writer per recipient at a time: the history stays in the order it happened.
        Recipient.objects.select_for_update().filter(pk=recipient.pk).first()
        for key, channels in cells.items():
            category = categories[key]
            if category.mandatory:
                continue  # always on; turning it "on" changes nothing
            for channel, enabled in channels.items():
                pref = Preference.objects.filter(
                    recipient=recipient, category=category, channel=channel
                ).first()
                current = pref.enabled if pref is not None else True
                if category.marketing and current:
                    current = consent_granted(
                        recipient=recipient, category=category, channel=channel
                    )
                if recipient.erasure_hold_since is not None:
                    current = False  # nothing given before the erasure counts
                if current == enabled:
                    continue  # no change, no record
                Preference.objects.update_or_create(
                    recipient=recipient,
                    category=category,
                    channel=channel,
                    defaults={"enabled": enabled, "source": origin.source},
                )
                _record(
                    recipient=recipient, category=category, channel=channel,
                    granted=enabled, origin=origin,
                )  # fmt: skip
                changed += 1
                granted = granted or enabled
                if not enabled:
                    turned_off.append((category.pk, channel))
        # Each cell the person turned off is counted (one statement for them all).
        analytics_unsubscribed_write(
            recipient_id=recipient.pk, cells=turned_off, reason=origin.source, at=timezone.now()
        )
        if granted:
            recipient_hold_lift(recipient=recipient)
    return changed


def marketing_consent_grant(*, recipient: Recipient, origin: RequestOrigin) -> ConsentRecord:
    """Consent to all marketing on every channel (e.g. a signup checkbox); fresh consent
    that lifts an erasure hold."""
    with transaction.atomic():
        record = _record(
            recipient=recipient, category=None, channel="", granted=True, origin=origin
        )
        recipient_hold_lift(recipient=recipient)
    return record


# Where a withdrawal reported by someone else came from: the person marked an email as
# spam (their mailbox provider's complaint), or unsubscribed at our email provider.
REPORTED_SOURCES = frozenset({ConsentSource.SPAM_COMPLAINT, ConsentSource.ESP_UNSUBSCRIBE})


def marketing_withdraw_reported(
    *, recipient_id: int, channel: str, source: str, evidence: str,
    delivery: tuple[int, datetime] | None = None,
) -> ConsentRecord | None:  # fmt: skip
    """A provider reports that the person wants no more marketing: all marketing on
    `channel` is withdrawn, one consent record (`source`, one of REPORTED_SOURCES; the
    report as its reason) and one `unsubscribed` event naming the reported `delivery`
    (id, accepted_at) when known. Mandatory categories (login codes, payments) need no
    consent and keep going. None when the recipient is gone."""
    if source not in REPORTED_SOURCES:
        raise ValueError(f"{source!r} is not a provider's report")
    with transaction.atomic():
        # One writer per recipient at a time, as for every other consent change.
        recipient = Recipient.objects.select_for_update().filter(pk=recipient_id).first()
        if recipient is None:
            return None
        origin = RequestOrigin(source=source, reason=evidence)
        record = _record(
            recipient=recipient, category=None, channel=channel, granted=False, origin=origin
        )
        analytics_unsubscribed_write(
            recipient_id=recipient.pk, cells=[(None, channel)], reason=origin.source,
            at=record.created_at, delivery=delivery,
        )  # fmt: skip
        return record


class ReasonMissing(Exception):
    """Support tried to record consent without saying why."""


def consent_by_support_record(
    *,
    recipient: Recipient,
    category: Category | None,
    channel: str,
    granted: bool,
    agent: AbstractBaseUser,
    reason: str,
) -> ConsentRecord:
    """A grant or withdrawal the person gave support (by phone, by letter), recorded with
    the agent and their reason.

    `category` None means all marketing; `channel` "" means every channel. The record is
    written even when it changes nothing: it is the evidence of what the person said. For
    one category the preference cells are set too, in the same transaction, so the gate
    reads the same answer as the history. Raises MandatoryCategory for a mandatory category
    (those go out whatever the consent), UnknownCell for an unknown channel and
    ReasonMissing without a reason.
    """
    reason = reason.strip()
    if not reason:
        raise ReasonMissing("Say why: what the person asked for.")
    if category is not None and category.mandatory:
        raise MandatoryCategory(category.key, channel or "every channel")
    if channel and channel not in Channel.values:
        raise UnknownCell(f"No channel {channel!r}.", field="channel")
    origin = RequestOrigin(source=ConsentSource.SUPPORT, agent=agent, reason=reason)
    with transaction.atomic():
        # One writer per recipient at a time, as for every other consent change.
        Recipient.objects.select_for_update().filter(pk=recipient.pk).first()
        if category is not None:
            for cell_channel in [channel] if channel else Channel.values:
                Preference.objects.update_or_create(
                    recipient=recipient,
                    category=category,
                    channel=cell_channel,
                    defaults={"enabled": granted, "source": ConsentSource.SUPPORT},
                )
        record = _record(
            recipient=recipient, category=category, channel=channel, granted=granted,
            origin=origin,
        )  # fmt: skip
        if granted:
            recipient_hold_lift(recipient=recipient)
        else:
            analytics_unsubscribed_write(
                recipient_id=recipient.pk, cells=[(category.pk if category else None, channel)],
                reason=origin.source, at=record.created_at,
            )  # fmt: skip
    return record


@dataclass(frozen=True)
class Unsubscribed:
    category: Category
    changed: bool
    recipient: Recipient  # whose language the confirmation is in


def unsubscribe(*, scope: UnsubscribeScope, origin: RequestOrigin) -> Unsubscribed | None:
    """One-click unsubscribe: that category off on every channel, one consent record.

    A replay (already unsubscribed, nothing granted since) changes nothing and writes
    no second record. None when the token names a recipient or category that is gone.
    """
    with transaction.atomic():
        recipient = Recipient.objects.select_for_update().filter(pk=scope.recipient_id).first()
        category = Category.objects.filter(pk=scope.category_id).first()
        if recipient is None or category is None:
            return None
        latest = (
            ConsentRecord.objects.filter(recipient=recipient, category=category)
            .order_by("-id")
            .first()
        )
        off = Preference.objects.filter(recipient=recipient, category=category, enabled=False)
        already = (
            latest is not None
            and not latest.granted
            and latest.channel == ""
            and off.count() == len(Channel.values)
        )
        if already:
            return Unsubscribed(category, changed=False, recipient=recipient)
        for channel in Channel.values:
            Preference.objects.update_or_create(
                recipient=recipient,
                category=category,
                channel=channel,
                defaults={"enabled": False, "source": ConsentSource.EMAIL_LINK},
            )
        _record(recipient=recipient, category=category, channel="", granted=False, origin=origin)
        # Counted for the link's message when it names one (its campaign's report counts it).
        analytics_unsubscribed_write(
            recipient_id=recipient.pk, cells=[(category.pk, scope.channel)],
            reason=origin.source, at=timezone.now(), delivery=scope.delivery,
        )  # fmt: skip
    return Unsubscribed(category, changed=True, recipient=recipient)


def quiet_hours_set(*, recipient: Recipient, start: time, end: time) -> QuietHours:
    """The recipient's own quiet window (local time; start == end means none)."""
    quiet, _ = QuietHours.objects.update_or_create(
        recipient=recipient, defaults={"start": start, "end": end}
    )
    return quiet


def recipient_settings_change(
    *,
    recipient: Recipient,
    source: str,
    quiet_hours: tuple[time, time] | None = None,
    timezone: str | None = None,
    locale: str | None = None,
) -> list[str]:
    """Change a person's quiet hours, time zone and language (None: leave it as it is).

    Each value that differs from the current one is written, and recorded as a
    `SettingChange` with `source`, in one transaction; an unchanged value writes nothing.
    The values must already be valid (the callers' forms and serializers check them).
    Returns the settings that changed.
    """
    changes: list[tuple[str, str]] = []
    if quiet_hours is not None:
        window = quiet_window(recipient=recipient)
        wanted = "{:%H:%M}-{:%H:%M}".format(*quiet_hours)
        if wanted != f"{window.start:%H:%M}-{window.end:%H:%M}":
            changes.append((SettingChange.Setting.QUIET_HOURS, wanted))
    if timezone is not None and timezone != (recipient.timezone or "UTC"):
        changes.append((SettingChange.Setting.TIMEZONE, timezone))
    if locale is not None and locale != recipient.locale:
        changes.append((SettingChange.Setting.LOCALE, locale))
    if not changes:
        return []
    with transaction.atomic():
        contact = {}
        for setting, value in changes:
            if setting == SettingChange.Setting.QUIET_HOURS:
                start, end = quiet_hours
                quiet_hours_set(recipient=recipient, start=start, end=end)
            else:
                contact[str(setting)] = value
        if contact:
            recipient_upsert(user_id=recipient.user_id, fields=contact)
            for name, value in contact.items():
                setattr(recipient, name, value)  # the caller's copy reads the new values
        SettingChange.objects.bulk_create(
            SettingChange(recipient=recipient, setting=s, value=v, source=source)
            for s, v in changes
        )
    return [str(setting) for setting, _ in changes]
