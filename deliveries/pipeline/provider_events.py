"""What a provider tells us after it accepted a message, applied to its delivery: an email
provider's webhook events, returned mail (SMTP bounces), an SMSC's delivery receipts.

`provider_event_apply` is the one place a provider event changes anything: it records the
event once (a replay of the same event is recognised by its key and changes nothing),
then by kind:
- delivered: the delivery moves from `delivered` (accepted by the provider) to `reached`;
- failed (an SMS receipt's UNDELIV, REJECTD, EXPIRED, DELETED): a `delivered` or `reached`
  delivery is `failed` (reason `rejected`), with the receipt in last_error;
- bounced, hard: the address goes on the suppression list and the delivery is `failed`
  (reason `bounced`); soft: recorded, nothing else (the provider keeps trying);
- complained: marketing email to the person is withdrawn in their consent history
  (source `spam_complaint`); mandatory categories (login codes) are not affected;
- unsubscribed (the person unsubscribed at the email provider): the same, with source
  `esp_unsubscribe`; it posts no status webhook (there is no event type for it);
- opened, clicked, deferred: recorded (shown and counted, never required).
What the producer subscribed to is posted to its status webhooks in the same transaction:
`delivery.reached`, `delivery.failed` (a hard bounce), `delivery.complained`,
`delivery.opened`, `delivery.clicked`, each with the provider's time of the event.

An event whose message id no delivery carries yet may have overtaken the record of its
send (outcomes are recorded at the end of a sender's round): it waits as an
`EarlyProviderEvent`, and `early_provider_events_sweep` (beat) applies it once the
delivery is recorded, or gives it up as unmatched after NOTIFY_PROVIDER_EVENT_WAIT
(logged; it changed nothing).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import Enum

from django.conf import settings
from django.db import IntegrityError, connection, transaction
from django.db.models import Exists, OuterRef, Q
from django.utils import timezone

from deliveries.changes import changes_announce
from deliveries.models import (
    Delivery,
    DeliveryStatus,
    EarlyProviderEvent,
    ProviderEvent,
    ProviderEventKind,
    Reason,
)
from deliveries.pipeline.suppression import address_suppress
from notify.models import Channel
from preferences.models import ConsentSource
from preferences.services import marketing_withdraw_reported

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class ProviderNews:
    """One provider event, normalised (the webhook view translates the provider's)."""

    esp: str
    key: str  # the provider's event id, or a hash of the event as posted
    kind: ProviderEventKind
    message_id: str
    hard: bool = False  # a bounce that is permanent
    occurred_at: datetime | None = None
    detail: str = ""
    channel: str = Channel.EMAIL


def message_id_carried(channel: str, message_id: str) -> Q:
    """The deliveries of `channel` whose provider message id is `message_id`. A long SMS
    keeps every part's id, space-separated, and any part may report."""
    if channel != Channel.SMS:
        return Q(channel=channel, provider_message_id=message_id)
    return Q(channel=channel) & (
        Q(provider_message_id=message_id)
        | Q(provider_message_id__startswith=f"{message_id} ")
        | Q(provider_message_id__endswith=f" {message_id}")
        | Q(provider_message_id__contains=f" {message_id} ")
    )


class Applied(Enum):
    RECORDED = "recorded"
    REPLAY = "replay"  # the same event again: nothing changed
    UNKNOWN_MESSAGE = "unknown_message"  # no delivery carries its message id
    WAITING = "waiting"  # unknown for now: kept until its send is recorded


# Provider news that changes no status but is announced (the producer's status webhooks
# post it). An unsubscribe is not: no webhook event type says it (the contract is
# unchanged), and analytics counts it as the consent change writes it.
_NEWS_KINDS = frozenset(
    {ProviderEventKind.COMPLAINED, ProviderEventKind.OPENED, ProviderEventKind.CLICKED}
)
# Provider news that withdraws the person's marketing email: the consent source it is
# recorded with, and how the record's reason names it.
_WITHDRAWALS = {
    ProviderEventKind.COMPLAINED: (ConsentSource.SPAM_COMPLAINT, "spam complaint about"),
    ProviderEventKind.UNSUBSCRIBED: (ConsentSource.ESP_UNSUBSCRIBE, "unsubscribe via"),
}


def provider_event_apply(*, news: ProviderNews, wait_if_unknown: bool = True) -> Applied:
    """Record a provider event against the email delivery that carries its message id,
    and apply what it means (see the module doc), all in one transaction. An event for a
    message no delivery carries is kept waiting for its send's record (`wait_if_unknown`)
    or, when the sweep looks again, reported unknown."""
    delivery = (
        Delivery.objects.filter(message_id_carried(news.channel, news.message_id))
        .select_related("notification")
        .first()
    )
    if delivery is None:
        if not wait_if_unknown:
            return Applied.UNKNOWN_MESSAGE
        logger.info("%s %s event for unknown message %s: waits for its send's record",
                    news.esp, news.kind, news.message_id)  # fmt: skip
        _early_keep(news)
        return Applied.WAITING
    with transaction.atomic():
        if not _event_recorded(news, delivery_id=delivery.pk):
            return Applied.REPLAY
        if news.kind == ProviderEventKind.DELIVERED:
            _status_move(delivery, {DeliveryStatus.DELIVERED}, DeliveryStatus.REACHED, news=news)
        elif news.kind == ProviderEventKind.FAILED:
            _status_move(
                delivery,
                {DeliveryStatus.DELIVERED, DeliveryStatus.REACHED},
                DeliveryStatus.FAILED,
                news=news,
                reason=Reason.REJECTED,
                last_error=news.detail,
            )
        elif news.kind == ProviderEventKind.BOUNCED and news.hard:
            evidence = f"{news.esp} hard bounce: {news.detail}".strip()
            address_suppress(channel=Channel.EMAIL, address=delivery.target, evidence=evidence)
            _status_move(
                delivery,
                {DeliveryStatus.DELIVERED, DeliveryStatus.REACHED},
                DeliveryStatus.FAILED,
                news=news,
                reason=Reason.BOUNCED,
                last_error=evidence,
            )
        elif news.kind in _WITHDRAWALS:
            source, what = _WITHDRAWALS[news.kind]
            marketing_withdraw_reported(
                recipient_id=delivery.notification.recipient_id,
                channel=Channel.EMAIL,
                source=source,
                evidence=f"{news.esp} {what} message {news.message_id}",
                delivery=(delivery.pk, delivery.accepted_at),
            )
        if news.kind in _NEWS_KINDS:
            changes_announce(
                news=[(delivery.pk, delivery.accepted_at, str(news.kind))],
                reported=True,
                reported_at=news.occurred_at,
            )
    return Applied.RECORDED


# One statement records an event once: a replay (the same provider and key) inserts
# nothing. get_or_create took a SELECT, then a savepoint around its INSERT: four round
# trips for every receipt and webhook event instead of one.
_EVENT_RECORD_SQL = f"""
    INSERT INTO {ProviderEvent._meta.db_table}
        (esp, key, delivery_id, kind, hard, message_id, occurred_at, received_at, detail)
    VALUES (%(esp)s, %(key)s, %(delivery_id)s, %(kind)s, %(hard)s, %(message_id)s,
            %(occurred_at)s, %(received_at)s, %(detail)s)
    ON CONFLICT (esp, key) DO NOTHING
"""


def _event_recorded(news: ProviderNews, *, delivery_id: int) -> bool:
    """Record the event against its delivery; False when it was recorded before (a
    replay). A replay posted at the same moment waits for the first one's transaction
    and then finds it, as the unique (esp, key) constraint decides."""
    params = {
        "esp": news.esp, "key": news.key, "delivery_id": delivery_id, "kind": str(news.kind),
        "hard": news.hard, "message_id": news.message_id, "occurred_at": news.occurred_at,
        "received_at": timezone.now(), "detail": news.detail,
    }  # fmt: skip
    with connection.cursor() as cursor:
        cursor.execute(_EVENT_RECORD_SQL, params)
        return cursor.rowcount == 1


def _early_keep(news: ProviderNews) -> None:
    """Keep an event that came before its send's record (a replay of it is kept once)."""
    try:
        with transaction.atomic():
            EarlyProviderEvent.objects.get_or_create(
                esp=news.esp,
                key=news.key,
                defaults={
                    "kind": news.kind,
                    "hard": news.hard,
                    "message_id": news.message_id,
                    "occurred_at": news.occurred_at,
                    "detail": news.detail,
                },
            )
    except IntegrityError:  # the same event posted twice at once: the other one keeps it
        pass


def early_provider_events_sweep(*, now: datetime | None = None) -> int:
    """Beat: apply waiting provider events whose delivery is now recorded, oldest first;
    give up those waiting longer than NOTIFY_PROVIDER_EVENT_WAIT as unmatched (logged,
    the provider's text dropped); drop given-up ones after
    NOTIFY_PROVIDER_EVENT_UNMATCHED_DAYS. Returns how many were applied.

    The waiting events are looked up by whether a delivery carries their id, not read
    oldest first: events about messages we never sent (another sender on the same
    provider account) cannot hold back the ones that are only early.
    """
    now = now or timezone.now()
    batch = settings.NOTIFY_PROVIDER_EVENT_SWEEP_BATCH
    EarlyProviderEvent.objects.filter(
        given_up_at__lt=now - timedelta(days=settings.NOTIFY_PROVIDER_EVENT_UNMATCHED_DAYS)
    ).delete()
    recorded = Exists(
        Delivery.objects.filter(channel=Channel.EMAIL, provider_message_id=OuterRef("message_id"))
    )
    waiting = EarlyProviderEvent.objects.filter(given_up_at__isnull=True).order_by(
        "received_at", "pk"
    )
    with transaction.atomic():
        due = list(waiting.filter(recorded).select_for_update(skip_locked=True)[:batch])
        for early in due:
            provider_event_apply(news=_news_of(early), wait_if_unknown=False)
        EarlyProviderEvent.objects.filter(pk__in=[e.pk for e in due]).delete()
    deadline = now - timedelta(seconds=settings.NOTIFY_PROVIDER_EVENT_WAIT)
    with transaction.atomic():
        stale = list(
            waiting.filter(~recorded, received_at__lt=deadline)
            .select_for_update(skip_locked=True)
            .only("pk", "esp", "kind", "message_id")[:batch]
        )
        for early in stale:
            logger.warning("%s %s event for unknown message %s: unmatched, given up",
                           early.esp, early.kind, early.message_id)  # fmt: skip
        EarlyProviderEvent.objects.filter(pk__in=[e.pk for e in stale]).update(
            given_up_at=now, detail=""
        )
    return len(due)


def _news_of(early: EarlyProviderEvent) -> ProviderNews:
    return ProviderNews(
        esp=early.esp,
        key=early.key,
        kind=ProviderEventKind(early.kind),
        message_id=early.message_id,
        hard=early.hard,
        occurred_at=early.occurred_at,
        detail=early.detail,
    )


def _status_move(
    delivery: Delivery,
    from_statuses: set[str],
    to: str,
    *,
    news: ProviderNews,
    reason: str = "",
    last_error: str = "",
) -> None:
    """Move the delivery to `to` if it is in one of `from_statuses` (a later event never
    reopens or undoes a further one: a bounce after `reached` still fails it, a late
    `delivered` after a bounce changes nothing)."""
    changes = {"status": to, "updated_at": timezone.now()}
    if reason:
        changes["reason"] = reason
    if last_error:
        changes["last_error"] = last_error[:2000]
    moved = Delivery.objects.filter(
        pk=delivery.pk, accepted_at=delivery.accepted_at, status__in=from_statuses
    ).update(**changes)
    if moved:  # a hard bounce fails a delivered email: the producer's webhooks hear it
        changes_announce(
            deliveries=[(delivery.pk, delivery.accepted_at, to)],
            reported=True,
            reported_at=news.occurred_at,
        )
