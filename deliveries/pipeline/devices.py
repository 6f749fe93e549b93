"""Devices: registering, re-registering in place, and deactivating.

A device's id is its identity. Push deliveries target that id, so when a browser or app
registers again with a new endpoint or token, the row is updated rather than replaced,
and a notification waiting for its retry reaches the new address.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from deliveries.channels.base import PERMANENT_DEVICE_CODES, SendResult
from deliveries.models import Device, DeviceKind
from egress.origins import endpoint_check
from notify.models import Recipient

logger = logging.getLogger(__name__)

# A device's `deactivated_reason` when a newer one of its person took its place.
OVER_CAP_REASON = "over_device_cap"


@transaction.atomic
def device_register(
    *,
    recipient: Recipient,
    kind: str,
    endpoint: str = "",
    p256dh: str = "",
    auth: str = "",
    token: str = "",
    platform: str = "",
    installation_id: str = "",
    previous: str = "",
) -> tuple[Device, bool]:
    """Create the device, or update the same browser/app in place; (device, created).

    The same browser/app is recognised by, in order: the client's `installation_id`;
    the endpoint/token it replaces (`previous`, e.g. from `pushsubscriptionchange`);
    the endpoint/token itself (a repeat registration). A match on the address moves it
    to this recipient, so one address never belongs to two devices (no duplicate pushes).

    A Web Push endpoint outside WEBPUSH_ALLOWED_ORIGINS raises EndpointRefused. Past
    NOTIFY_DEVICES_PER_RECIPIENT active devices, the least recently registered others
    are deactivated (`devices_over_cap_deactivate`).
    """
    if kind == DeviceKind.WEBPUSH:
        endpoint_check(endpoint)
    # One registration at a time per person, so two at once cannot both stay under the
    # cap. NO KEY: the lock does not hold up rows that only reference the recipient.
    list(Recipient.objects.select_for_update(no_key=True).filter(pk=recipient.pk).values("pk"))
    address = Q(endpoint=endpoint) if kind == DeviceKind.WEBPUSH else Q(token=token)
    candidates = Device.objects.select_for_update().filter(kind=kind)
    device = None
    if installation_id:
        device = candidates.filter(recipient=recipient, installation_id=installation_id).first()
    if device is None and previous:
        old = Q(endpoint=previous) if kind == DeviceKind.WEBPUSH else Q(token=previous)
        device = candidates.filter(old, recipient=recipient).first()
    # The new address may already be a row of its own (a repeat, or another recipient).
    same_address = candidates.filter(address).exclude(pk=getattr(device, "pk", None)).first()
    if device is None:
        device = same_address
    elif same_address is not None:
        # Two rows for one address would mean two pushes: the older one goes.
        same_address.delete()

    fields = {
        "recipient": recipient,
        "endpoint": endpoint if kind == DeviceKind.WEBPUSH else "",
        "p256dh": p256dh,
        "auth": auth,
        "token": token if kind == DeviceKind.FCM else "",
        "platform": platform,
        "active": True,
        "deactivated_reason": "",
        "registered_at": timezone.now(),
    }
    if installation_id:
        fields["installation_id"] = installation_id
    created = device is None
    if device is None:
        device = Device.objects.create(kind=kind, **fields)
    else:
        for name, value in fields.items():
            setattr(device, name, value)
        device.save()
    devices_over_cap_deactivate(recipient_id=recipient.pk, keep=device.pk)
    return device, created


def devices_over_cap_deactivate(*, recipient_id: int, keep: int) -> int:
    """Deactivate the person's active devices past NOTIFY_DEVICES_PER_RECIPIENT: `keep`
    (the one just registered) and the most recently registered others stay. Returns how
    many were deactivated.

    Deactivated as a dead token is: the row, its id and its deliveries' history stay,
    it receives nothing more, and the same browser/app registering again is recognised
    and active again (another one going in its place). The caller holds the recipient's
    lock (`device_register`)."""
    stays = settings.NOTIFY_DEVICES_PER_RECIPIENT - 1  # besides `keep`
    over = list(
        Device.objects.filter(recipient_id=recipient_id, active=True)
        .exclude(pk=keep)
        .order_by("-registered_at", "-pk")
        .values_list("pk", flat=True)[stays:]
    )
    if not over:
        return 0
    evicted = Device.objects.filter(pk__in=over, active=True).update(
        active=False, deactivated_reason=OVER_CAP_REASON, updated_at=timezone.now()
    )
    logger.info("deactivated %s devices of recipient %s over the cap", evicted, recipient_id)
    return evicted


def device_remove(*, recipient: Recipient, device_id: int) -> bool:
    """The user removed the device: no more pushes, and its address is forgotten."""
    removed = Device.objects.filter(pk=device_id, recipient=recipient).update(
        active=False,
        deactivated_reason="removed",
        endpoint="",
        p256dh="",
        auth="",
        token="",
        updated_at=timezone.now(),
    )
    return removed == 1


def devices_deactivate(*, kind: str, answers: Mapping[int, str] | Iterable[tuple[int, str]]) -> int:
    """Deactivate, in one UPDATE, the devices whose provider answer proves them gone.

    `answers` maps device id → the provider's code (`"410"`, `"UNREGISTERED"`, …); only
    the codes in PERMANENT_DEVICE_CODES (the channels' list) count. Returns how many
    devices were deactivated.
    """
    pairs = answers.items() if isinstance(answers, Mapping) else answers
    permanent = PERMANENT_DEVICE_CODES.get(kind, frozenset())
    by_code: dict[str, list[int]] = {}
    for device_id, code in pairs:
        if str(code) in permanent:
            by_code.setdefault(str(code), []).append(int(device_id))
    total = 0
    now = timezone.now()
    for code, ids in by_code.items():
        total += Device.objects.filter(pk__in=ids, kind=kind, active=True).update(
            active=False, deactivated_reason=f"provider:{code}", updated_at=now
        )
    if total:
        logger.info("deactivated %s %s devices after permanent provider answers", total, kind)
    return total


def devices_gone_deactivate(*, answers: Iterable[tuple[str, str, SendResult]]) -> int:
    """Deactivate the push devices that provider answers reported gone, per channel in
    bulk: `answers` are (channel, target, result) of the tries, a push target being its
    device id. Results that do not say `device_gone` are passed over."""
    gone: dict[str, dict[int, str]] = {}
    for channel, target, result in answers:
        if result.device_gone and target.isdigit():
            gone.setdefault(channel, {})[int(target)] = result.status_code
    return sum(devices_deactivate(kind=kind, answers=ids) for kind, ids in gone.items())
