"""What an email provider tells us after it accepted a message, applied to its delivery.

`provider_event_apply` is the one place a provider event changes anything: it records the
event once (a replay of the same event is recognised by its key and changes nothing),
then by kind:
- delivered: the delivery moves from `delivered` (accepted by the provider) to `reached`;
- bounced, hard: the address goes on the suppression list and the delivery is `failed`
  (reason `bounced`); soft: recorded, nothing else (the provider keeps trying);
- complained: marketing email to the person is withdrawn in their consent history
  (source `spam_complaint`); mandatory categories (login codes) are not affected;
- opened, clicked, deferred: recorded (shown and counted, never required).
An event whose message id no delivery carries is logged and changes nothing.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime
from enum import Enum

from django.db import transaction
from django.utils import timezone

from deliveries.models import Delivery, DeliveryStatus, ProviderEvent, ProviderEventKind, Reason
from deliveries.pipeline.suppression import address_suppress
from deliveries.webhook_events import webhook_events_write
from notify.models import Channel
from preferences.services import marketing_withdraw_for_complaint

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


class Applied(Enum):
    RECORDED = "recorded"
    REPLAY = "replay"  # the same event again: nothing changed
    UNKNOWN_MESSAGE = "unknown_message"  # no delivery carries its message id


def provider_event_apply(*, news: ProviderNews) -> Applied:
    """Record a provider event against the email delivery that carries its message id,
    and apply what it means (see the module doc), all in one transaction."""
    delivery = (
        Delivery.objects.filter(channel=Channel.EMAIL, provider_message_id=news.message_id)
        .select_related("notification")
        .first()
    )
    if delivery is None:
        logger.info("%s %s event for unknown message %s: ignored", news.esp, news.kind,
                    news.message_id)  # fmt: skip
        return Applied.UNKNOWN_MESSAGE
    with transaction.atomic():
        _, created = ProviderEvent.objects.get_or_create(
            esp=news.esp,
            key=news.key,
            defaults={
                "delivery_id": delivery.pk,
                "kind": news.kind,
                "hard": news.hard,
                "message_id": news.message_id,
                "occurred_at": news.occurred_at,
                "detail": news.detail,
            },
        )
        if not created:
            return Applied.REPLAY
        if news.kind == ProviderEventKind.DELIVERED:
            _status_move(delivery, {DeliveryStatus.DELIVERED}, DeliveryStatus.REACHED)
        elif news.kind == ProviderEventKind.BOUNCED and news.hard:
            evidence = f"{news.esp} hard bounce: {news.detail}".strip()
            address_suppress(channel=Channel.EMAIL, address=delivery.target, evidence=evidence)
            _status_move(
                delivery,
                {DeliveryStatus.DELIVERED, DeliveryStatus.REACHED},
                DeliveryStatus.FAILED,
                reason=Reason.BOUNCED,
                last_error=evidence,
            )
        elif news.kind == ProviderEventKind.COMPLAINED:
            marketing_withdraw_for_complaint(
                recipient_id=delivery.notification.recipient_id,
                channel=Channel.EMAIL,
                evidence=f"{news.esp} spam complaint about message {news.message_id}",
            )
    return Applied.RECORDED


def _status_move(
    delivery: Delivery, from_statuses: set[str], to: str, *, reason: str = "", last_error=""
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
        webhook_events_write(deliveries=[(delivery.pk, delivery.accepted_at, to)])
