"""Erasure, the deliveries' part: every delivery of the person's notifications with its
attempts (targets and provider answers) and provider events (bounces, complaints, opens),
their devices (tokens, endpoints), their addresses on the hard-bounce list, and in Redis
their push slots and each device's live registry key and seen-entries set. Called by
campaigns.erasure.person_erase."""

from __future__ import annotations

from django.db.models import Q
from django_redis import get_redis_connection

from deliveries.counts import delivery_counts_settle
from deliveries.models import (
    AddressSuppression,
    Delivery,
    DeliveryAttempt,
    Device,
    DigestItem,
    DigestWindow,
    EarlyProviderEvent,
    ProviderEvent,
)
from deliveries.pipeline.live import feed_seen_key, live_key, seen_key
from flow.fairness import push_slots_key
from notify.erasure import admin_log_forget
from notify.models import Channel, Recipient


def deliveries_erase(*, recipient: Recipient) -> dict[str, int]:
    """Delete the recipient's deliveries, attempts, devices, digest windows and bounce-list
    entries, and their keys in Redis; returns counts per kind.

    The bounce-list entries go because they hold the address in clear; the erasure's own
    suppression (a keyed hash of it) keeps the address from being contacted again.
    Redis being down raises RedisError, so the caller's transaction rolls back.
    """
    deliveries = Delivery.objects.filter(notification__recipient=recipient)
    delivery_ids = list(deliveries.values_list("pk", flat=True))
    device_ids = list(Device.objects.filter(recipient=recipient).values_list("pk", flat=True))
    removed = {
        "attempts": DeliveryAttempt.objects.filter(delivery_id__in=delivery_ids).count(),
        "deliveries": len(delivery_ids),
        "devices": len(device_ids),
    }
    # Final outcomes stay in the metrics; deliveries that will never finish leave them.
    delivery_counts_settle(delivery_ids=delivery_ids)
    # Provider events hold the address and what the person did with the message.
    removed["provider_events"] = ProviderEvent.objects.filter(
        delivery_id__in=delivery_ids
    ).delete()[0]
    # So do events still waiting for their send's record (the sweep may not have run).
    message_ids = set(
        deliveries.exclude(provider_message_id="").values_list("provider_message_id", flat=True)
    )
    if message_ids:
        removed["provider_events"] += EarlyProviderEvent.objects.filter(
            message_id__in=message_ids
        ).delete()[0]
    Delivery.objects.filter(pk__in=delivery_ids).delete()
    Device.objects.filter(pk__in=device_ids).delete()
    # Open digest windows list the person's events: they go with them (nothing is sent).
    windows = DigestWindow.objects.filter(recipient=recipient)
    removed["digest_windows"] = windows.count()
    DigestItem.objects.filter(window__in=windows).delete()
    windows.delete()
    on_list = Q(pk__in=[])
    if recipient.email:
        on_list |= Q(channel=Channel.EMAIL, address=recipient.email.lower())
    if recipient.phone:
        on_list |= Q(channel=Channel.SMS, address=recipient.phone)
    removed["bounce_entries"] = AddressSuppression.objects.filter(on_list).delete()[0]
    admin_log_forget(model=Delivery, pks=delivery_ids)
    admin_log_forget(model=Device, pks=device_ids)
    keys = [push_slots_key(recipient.pk), feed_seen_key(recipient.pk)]
    for device_id in device_ids:
        keys += [live_key(device_id), seen_key(device_id)]
    get_redis_connection("default").delete(*keys)
    return removed
