"""Enqueueing: a send message for a delivery, admitted by the per-recipient push limit."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import NamedTuple

from django.conf import settings
from django.utils import timezone

from deliveries.models import CLAIMABLE_STATUSES, Delivery, DeliveryStatus, Reason
from flow.fairness import SlotTake, push_drop_record, push_slot_member, push_slots_take
from notify.broker import batch_size_for, chunked, publish_task
from notify.models import PUSH_CHANNELS

logger = logging.getLogger(__name__)

# The names of the pipeline's two tasks (deliveries/tasks.py): here, below the tasks,
# so the pipeline that publishes them can name them too.
ROUTE_TASK = "deliveries.route"
SEND_TASK = "deliveries.send"


def _send_publish(
    delivery_id: int | list[int],
    *,
    channel: str,
    queue: str,
    countdown: float | None,
    priority: int,
) -> None:
    """The one shape of a send message: its ids, and its channel for the sender slots."""
    publish_task(
        SEND_TASK,
        args=[delivery_id],
        kwargs={"channel": channel},
        queue=queue,
        countdown=countdown,
        priority=priority,
    )


def delivery_enqueue(
    *,
    delivery_id: int,
    channel: str,
    queue: str,
    countdown: float | None = None,
    retry: bool = False,
    push_owner: tuple[int, object] | None = None,
    mark_enqueued: bool = True,
) -> bool:
    """Publish a send message for a delivery (call after commit); False when not sent.

    `push_owner` is (recipient id, notification id) when the caller knows them, which
    saves a lookup for the push limit. `mark_enqueued=False` when the caller already
    wrote `enqueued_at` with the row (routing does, so a first send costs no UPDATE);
    if the publish then fails, `enqueued_at` is cleared so the sweeper picks it up soon.
    """
    if channel in PUSH_CHANNELS and not _push_slot_admits(
        delivery_id=delivery_id,
        channel=channel,
        countdown=countdown,
        retry=retry,
        owner=push_owner,
    ):
        return False
    priority = settings.NOTIFY_PRIORITY_RETRY if retry else settings.NOTIFY_PRIORITY_FIRST_ATTEMPT
    try:
        _send_publish(
            delivery_id, channel=channel, queue=queue, countdown=countdown, priority=priority
        )
    except Exception:  # the broker is away: the row is the record, the sweeper resends
        logger.exception("delivery %s: publish failed; the sweeper will resend", delivery_id)
        Delivery.objects.filter(pk=delivery_id).update(enqueued_at=None)
        return False
    if mark_enqueued:
        Delivery.objects.filter(pk=delivery_id).update(enqueued_at=timezone.now())
    return True


def deliveries_enqueue(
    *,
    started: Sequence[tuple[int, str, str]],
    push_owners: dict,
    push_devices: dict[int, str] | None = None,
) -> int:
    """Publish the send messages of freshly routed deliveries (call after commit), one
    message per channel and queue for each batch of ids; returns how many were sent.

    `started` holds (delivery id, channel, queue); `push_owners` maps a push delivery's
    id to its (recipient id, notification id), for the per-recipient push limit, which
    admits each push on its own, in the order given (routing puts the device whose turn
    is due first). `push_devices` maps a Web Push delivery to its device, whose turn is
    recorded when it gets a slot. `enqueued_at` was written with the rows; if a publish
    fails, it is cleared for that batch so the sweeper picks it up soon.
    """
    push_devices = push_devices or {}
    pushes = [
        PushJob(
            delivery_id, channel, push_owners.get(delivery_id), push_devices.get(delivery_id, "")
        )
        for delivery_id, channel, _ in started
        if channel in PUSH_CHANNELS
    ]
    # Every push's slot in one Redis round trip, taken in the order given.
    refused = {
        job.delivery_id
        for job, admitted in zip(
            pushes, _push_slots_admit(pushes, countdown=None, retry=False), strict=True
        )
        if not admitted
    }
    lanes: dict[tuple[str, str], list[int]] = {}
    for delivery_id, channel, queue in started:
        if delivery_id in refused:
            continue
        lanes.setdefault((channel, queue), []).append(delivery_id)
    sent = 0
    for (channel, queue), ids in lanes.items():
        # FCM takes a notification's devices (and a campaign's) in one multicast.
        size = settings.NOTIFY_FCM_BATCH_SIZE if channel == "fcm" else batch_size_for(queue)
        for batch in chunked(ids, size):
            try:
                _send_publish(
                    batch,
                    channel=channel,
                    queue=queue,
                    countdown=None,
                    priority=settings.NOTIFY_PRIORITY_FIRST_ATTEMPT,
                )
            except Exception:  # the broker is away: the rows are the record
                logger.exception("deliveries %s: publish failed; the sweeper will resend", batch)
                Delivery.objects.filter(pk__in=batch).update(enqueued_at=None)
                continue
            sent += len(batch)
    return sent


def send_defer(
    *, delivery_id: int | list[int], channel: str, queue: str, countdown: float | None
) -> bool:
    """Publish a send message again, `countdown` seconds out (None: now): its channel
    had no free sender here and no room in its line, or it waited in the line too long
    (flow/senders.py). No claim was taken, so the rows need no change and
    this costs no SQL: a thread refused a sender never waits for a database connection.
    (A row still unsent NOTIFY_RETRY_RESWEEP_AFTER after its last publish gets a copy
    from the sweeper, as a message that long in any queue does; the claim makes the copy
    harmless.) If the publish fails, `enqueued_at` is cleared and the sweeper resends
    soon; False then."""
    try:
        _send_publish(
            delivery_id,
            channel=channel,
            queue=queue,
            countdown=countdown,
            priority=settings.NOTIFY_PRIORITY_RETRY,
        )
    except Exception:  # the broker is away: the rows are the record
        ids = delivery_id if isinstance(delivery_id, list) else [delivery_id]
        logger.exception("deliveries %s: deferral failed; the sweeper will resend", ids)
        Delivery.objects.filter(pk__in=ids, status__in=CLAIMABLE_STATUSES).update(enqueued_at=None)
        return False
    return True


def delivery_dead_letter(*, delivery_id: int, queue: str) -> None:
    """A member of a send batch ended dead: publish a message of its own that its worker
    rejects on arrival, so RabbitMQ dead-letters it as it does a single send's."""
    try:
        publish_task(
            SEND_TASK,
            args=[delivery_id],
            kwargs={"dead_letter": True},
            queue=queue,
            priority=settings.NOTIFY_PRIORITY_RETRY,
        )
    except Exception:  # the delivery is `dead` and shown in admin either way
        logger.exception("delivery %s: could not publish its dead letter", delivery_id)


class PushJob(NamedTuple):
    """A push delivery to admit: its owner, (recipient id, notification id), when the
    caller knows it (None: looked up), and its Web Push device, whose turn is recorded
    when it gets a slot ('' for none)."""

    delivery_id: int
    channel: str
    owner: tuple[int, object] | None
    device: str = ""


def _push_slot_admits(
    *,
    delivery_id: int,
    channel: str,
    countdown: float | None,
    retry: bool,
    owner: tuple[int, object] | None,
    device: str = "",
) -> bool:
    """Per-recipient push fairness for one job (see `_push_slots_admit`)."""
    job = PushJob(delivery_id, channel, owner, device)
    return _push_slots_admit([job], countdown=countdown, retry=retry)[0]


def _push_slots_admit(
    jobs: Sequence[PushJob], *, countdown: float | None, retry: bool
) -> list[bool]:
    """Per-recipient push fairness: may these push jobs be queued now? One answer each,
    in order; their slots are taken in one Redis round trip, in the order given.

    A first attempt without a free slot is dropped at once (suppressed, counted) and
    never reaches a sender; a retry without one is left to the sweeper, which offers it
    again later — a retry slows down rather than disappears. A routed Web Push
    delivery's device has its turn recorded when it gets the slot.
    """
    admitted = [True] * len(jobs)
    takes: list[SlotTake] = []
    taking: list[int] = []  # the index in `jobs` of each take
    for index, job in enumerate(jobs):
        owner = job.owner
        if owner is None:
            owner = (
                Delivery.objects.filter(pk=job.delivery_id)
                .values_list("notification__recipient_id", "notification_id")
                .first()
            )
            if owner is None:
                continue  # gone: the sender will find nothing to do
        recipient_id, notification_id = owner
        member = push_slot_member(
            channel=job.channel, delivery_id=job.delivery_id, notification_id=notification_id
        )
        takes.append(SlotTake(recipient_id, member, countdown or 0, job.device))
        taking.append(index)
    for index, taken in zip(taking, push_slots_take(takes=takes), strict=True):
        if not taken:
            admitted[index] = False
            _push_slot_refused(jobs[index], retry=retry)
    return admitted


def _push_slot_refused(job: PushJob, *, retry: bool) -> None:
    """No free slot: a retry waits for the sweeper; a first attempt is dropped."""
    now = timezone.now()
    if retry:
        Delivery.objects.filter(pk=job.delivery_id).update(enqueued_at=None, updated_at=now)
        return
    dropped = Delivery.objects.filter(pk=job.delivery_id, status=DeliveryStatus.QUEUED).update(
        status=DeliveryStatus.SUPPRESSED,
        reason=Reason.PUSH_LIMIT,
        next_attempt_at=None,
        enqueued_at=None,
        finished_at=now,
        updated_at=now,
    )
    if dropped:
        push_drop_record(channel=job.channel, count=dropped)
