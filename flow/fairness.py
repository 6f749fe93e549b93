"""Per-recipient push fairness: at most N push jobs queued + in flight.

A slot is a member of a Redis sorted set per recipient, scored by when its lease ends.
Taking one is a single Lua script (prune expired leases, count, add), so concurrent
routers and senders never overshoot; a crashed worker's slot simply lapses. A push that
finds no free slot is dropped at once — it never occupies a sender — and counted; the
log gets one aggregated line at most once a minute, not a line per drop.

Who gets the slots takes turns. A recipient with more browsers than the limit would
otherwise lose the same devices (the newest ids) on every notification, so each Web Push
admission is remembered per device, and routing offers the slots to the devices whose
last turn is oldest first (never served first). Turns rather than "most recently
active": a browser the person rarely opens would never count as recent, and still must
get its share; over a few notifications every device gets one.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from typing import NamedTuple

from django.conf import settings
from django_redis import get_redis_connection
from redis.exceptions import RedisError

logger = logging.getLogger(__name__)

# Per channel, read by /metrics (deliveries.ops) as notify_push_drops_total{channel}.
DROPS_KEY_PREFIX = "notify:metrics:push_drops:"
_DROPS_WINDOW_KEY = "notify:push:drops:window"
_DROPS_LOGGED_KEY = "notify:push:drops:logged"

# KEYS[1] slot set, KEYS[2] the recipient's turns; ARGV: now, lease end, limit, member,
# device ('' for none), how long turns are remembered. 1 = taken (or already held).
_TAKE = """
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[1])
if not redis.call('ZSCORE', KEYS[1], ARGV[4]) then
  if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[3]) then
    return 0
  end
end
redis.call('ZADD', KEYS[1], ARGV[2], ARGV[4])
-- The whole set lives as long as its longest lease: no key outlives its slots.
local last = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')
redis.call('PEXPIREAT', KEYS[1], math.ceil(tonumber(last[2]) * 1000))
if ARGV[5] ~= '' then
  redis.call('ZADD', KEYS[2], ARGV[1], ARGV[5])
  redis.call('EXPIRE', KEYS[2], ARGV[6])
end
return 1
"""


def push_slots_key(recipient_id: int) -> str:
    """The sorted set of the recipient's held push slots (lease end as the score)."""
    return f"notify:push:slots:{recipient_id}"


def push_turns_key(recipient_id: int) -> str:
    """The sorted set of the recipient's Web Push devices, scored by their last turn."""
    return f"notify:push:turns:{recipient_id}"


def _redis():
    return get_redis_connection("default")


def push_slot_member(*, channel: str, delivery_id: int, notification_id: object) -> str:
    """What holds a slot: one Web Push delivery, or one notification's whole FCM batch."""
    return f"fcm:{notification_id}" if channel == "fcm" else str(delivery_id)


def push_slot_take(
    *, recipient_id: int, member: str, hold_for: float = 0.0, device: str = ""
) -> bool:
    """Hold one of the recipient's push slots for this job; False when all are taken.

    Taking a slot the job already holds renews it. The lease covers `hold_for` (a
    countdown before the job runs) plus the send claim timeout, after which a slot
    nobody released frees itself. `device`, when given, has its turn recorded with the
    slot (see `push_turn_order`).
    """
    return push_slots_take(takes=[SlotTake(recipient_id, member, hold_for, device)])[0]


class SlotTake(NamedTuple):
    """One job's push slot to take (see `push_slot_take`)."""

    recipient_id: int
    member: str
    hold_for: float = 0.0
    device: str = ""


def push_slots_take(*, takes: Sequence[SlotTake]) -> list[bool]:
    """`push_slot_take` for each of `takes`, in one Redis round trip whatever their
    number; one answer each, in order. The scripts run one after another in the order
    given, as separate calls would, so earlier jobs take a recipient's slots first."""
    if not takes:
        return []
    limit = settings.NOTIFY_PUSH_PER_RECIPIENT_LIMIT
    memory = settings.NOTIFY_PUSH_TURN_MEMORY_SECONDS
    now = 0.0
    try:
        pipe = _redis().pipeline(transaction=False)
        for take in takes:
            # Each take its own moment, later than the one before: a device's turn is
            # that time, and the turns keep the order the devices were served in.
            now = max(time.time(), now + 1e-6)
            lease_end = now + take.hold_for + settings.NOTIFY_SEND_CLAIM_TIMEOUT
            pipe.eval(
                _TAKE,
                2,
                push_slots_key(take.recipient_id),
                push_turns_key(take.recipient_id),
                now,
                lease_end,
                limit,
                take.member,
                take.device,
                memory,
            )
        answers = pipe.execute(raise_on_error=False)
    except RedisError:
        answers = [RedisError()] * len(takes)
    if any(isinstance(answer, Exception) for answer in answers):
        # Fairness is a guard, not a gate: without Redis, pushes still go out.
        logger.warning("push fairness: Redis unavailable; slot not enforced")
    return [isinstance(answer, Exception) or bool(answer) for answer in answers]


def push_turn_order(*, devices: Mapping[int, list[str]]) -> dict[int, list[str]]:
    """Each recipient's Web Push device ids in the order they are offered push slots:
    never served first, then the longest since their last turn (ties by id).

    Only recipients with more devices than the limit are looked up (one Redis round
    trip for all of them); the others keep their order, as every device gets a slot.
    Without Redis the order is left as it is: fairness is a guard, not a gate.
    """
    crowded = [
        recipient_id
        for recipient_id, ids in devices.items()
        if len(ids) > settings.NOTIFY_PUSH_PER_RECIPIENT_LIMIT
    ]
    ordered = {recipient_id: list(ids) for recipient_id, ids in devices.items()}
    if not crowded:
        return ordered
    try:
        pipe = _redis().pipeline(transaction=False)
        for recipient_id in crowded:
            pipe.zmscore(push_turns_key(recipient_id), devices[recipient_id])
        scores = pipe.execute()
    except RedisError:
        logger.warning("push fairness: Redis unavailable; devices offered in id order")
        return ordered
    for recipient_id, turns in zip(crowded, scores, strict=True):
        last_turn = {
            device: float("-inf") if turn is None else turn
            for device, turn in zip(devices[recipient_id], turns, strict=True)
        }
        ordered[recipient_id].sort(key=lambda device: (last_turn[device], int(device)))
    return ordered


def push_slot_release(*, recipient_id: int, member: str) -> None:
    """The job is over (delivered, failed, expired, or waiting for a retry)."""
    push_slots_release(slots=[(recipient_id, member)])


def push_slots_release(*, slots: Sequence[tuple[int, str]]) -> None:
    """`push_slot_release` for each (recipient id, member), in one Redis round trip."""
    if not slots:
        return
    try:
        pipe = _redis().pipeline(transaction=False)
        for recipient_id, member in slots:
            pipe.zrem(push_slots_key(recipient_id), member)
        pipe.execute()
    except RedisError:
        logger.warning("push fairness: could not release a slot; its lease will lapse")


def push_slots_held(*, recipient_id: int) -> int:
    """How many of the recipient's slots are held now (for tests and the admin)."""
    key = push_slots_key(recipient_id)
    return int(_redis().zcount(key, time.time(), "+inf"))


def push_drop_record(*, channel: str, count: int = 1) -> None:
    """Count dropped pushes; log the sum of the last minute at most once a minute."""
    try:
        client = _redis()
        client.incrby(f"{DROPS_KEY_PREFIX}{channel}", count)
        client.incrby(_DROPS_WINDOW_KEY, count)
        if client.set(_DROPS_LOGGED_KEY, "1", nx=True, ex=settings.NOTIFY_PUSH_DROP_LOG_INTERVAL):
            dropped = int(client.getdel(_DROPS_WINDOW_KEY) or 0)
            logger.warning(
                "push fairness: dropped %s push jobs of recipients over their limit of %s "
                "since the last report",
                dropped,
                settings.NOTIFY_PUSH_PER_RECIPIENT_LIMIT,
            )
    except RedisError:
        logger.warning("push fairness: could not count a drop")


def push_drops_total() -> int:
    """Pushes dropped so far, all push channels together."""
    client = _redis()
    return sum(int(client.get(key) or 0) for key in client.scan_iter(f"{DROPS_KEY_PREFIX}*"))
