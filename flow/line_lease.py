"""The channel lines' record outside the process: what waits in a worker's memory is
also written to Redis under a lease the worker keeps alive, so when the worker dies
another one publishes it again within seconds.

A send waiting in its channel's line (flow/senders.py) has had its
broker message acknowledged: without a record elsewhere, a worker killed with a line
strands it until the sweeper's re-sweep of unsent rows (NOTIFY_RETRY_RESWEEP_AFTER,
minutes) — longer than a login code lives. So:

- joining a line writes the send to this process's Redis hash, and marks the process
  alive for LEASE_SECONDS (one round trip, pipelined);
- a heartbeat thread in every worker renews that mark every HEARTBEAT_SECONDS, removes
  the sends the lines have since run or handed back (batched: no round trip when a send
  leaves a line), and looks for processes whose mark expired: their recorded sends are
  published again (at once, by the publisher the send pipeline hands over with
  `line_publisher_set`) by one recoverer (a short Redis lock each);
- a clean shutdown hands the lines back to the broker and removes the record.

Why not one queue per (class, channel) at the broker: Celery gives a worker one prefetch
window over all the queues it consumes, so the broker cannot hold an email back while
SMS senders are free in the same process; one worker process per channel and class
would multiply the processes on a small host (docs/pipeline.md).

A send published twice (the owner was only stalled past its lease, or a recoverer's
publish raced the owner's clean hand-back) is harmless: the claim lets one attempt run.
If Redis is away, joining still works and logs: the row stays the record, found by the
re-sweep as before.
"""

from __future__ import annotations

import atexit
import itertools
import json
import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

from django_redis import get_redis_connection

logger = logging.getLogger(__name__)

# A worker that has not renewed its mark for this long is taken for dead and its lines
# are published again; a process stalled that long (CPU starved, paused) only costs
# a duplicate message the claim absorbs.
LEASE_SECONDS = 10
HEARTBEAT_SECONDS = 1.0
# One recoverer per dead worker: the lock outlives a recovery's publishes.
RECOVERY_LOCK_SECONDS = 30

OWNERS_KEY = "notify:lines:owners"

# How a recovered send is published again: deliveries' `send_defer`, handed over when the
# app is ready (flow imports no app). Called with delivery_id, channel, queue, countdown;
# True once published.
Publisher = Callable[..., bool]
_publisher: list[Publisher | None] = [None]


def line_publisher_set(publisher: Publisher) -> None:
    """The function recovered sends are published again with (deliveries' send_defer)."""
    _publisher[0] = publisher


def _lines_key(owner: str) -> str:
    return f"notify:lines:{owner}"


def _alive_key(owner: str) -> str:
    return f"notify:lines:alive:{owner}"


def _recovery_lock_key(owner: str) -> str:
    return f"notify:lines:recovering:{owner}"


class _State:
    """This process's identity, its tokens, the tokens to remove, and the heartbeat."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.pid = 0
        self.owner = ""
        self.tokens = itertools.count(1)
        # Tokens of sends that left a line since the last heartbeat, and those of the
        # heartbeat before: each is removed twice, so a record written just after its
        # send already left (the two race) does not outlive the next beat.
        self.left: list[str] = []
        self.left_before: list[str] = []
        self.heartbeat: threading.Thread | None = None

    def identity(self) -> str:
        """This process's owner name (a fresh one in a forked child)."""
        pid = os.getpid()
        if pid != self.pid:
            self.pid = pid
            self.owner = f"{socket.gethostname()}:{pid}:{uuid.uuid4().hex[:8]}"
            self.heartbeat = None
            self.left_take()
        return self.owner

    def left_take(self, *, keep_recent: bool = False) -> list[str]:
        """The tokens to remove now; `keep_recent`: those that left since the last beat
        are removed again at the next one (the race above). Call under the lock."""
        gone = self.left + self.left_before
        self.left_before = self.left if keep_recent else []
        self.left = []
        return gone


_state = _State()


def line_token() -> str:
    """A fresh token for a send about to join a line (no round trip)."""
    with _state.lock:
        _state.identity()
        return str(next(_state.tokens))


def line_join_record(*, token: str, channel: str, queue: str, work: Any) -> None:
    """Record that `work` (a send's delivery id or ids) waits under `token` in this
    process's line of `channel` on `queue`. If Redis refuses, the row is the only record
    (found by the re-sweep), as before lines were recorded."""
    with _state.lock:
        owner = _state.identity()
    record = json.dumps({"work": work, "channel": channel, "queue": queue})
    try:
        pipe = get_redis_connection("default").pipeline(transaction=False)
        pipe.hset(_lines_key(owner), token, record)
        pipe.set(_alive_key(owner), "1", ex=LEASE_SECONDS)
        pipe.sadd(OWNERS_KEY, owner)
        pipe.execute()
    except Exception:
        logger.warning("could not record a waiting send %s in Redis", work, exc_info=True)


def line_left(token: str) -> None:
    """The send recorded under `token` left its line (run, or handed back to the
    broker): its record goes at the next heartbeat. No round trip here."""
    with _state.lock:
        _state.left.append(token)


def line_leases_start() -> None:
    """Start this process's heartbeat thread, once (a worker starts it when ready, so
    it recovers other workers' lines even before it has a line of its own)."""
    with _state.lock:
        _state.identity()
        if _state.heartbeat is not None:
            return
        _state.heartbeat = threading.Thread(
            target=_beat_forever, name="notify-line-lease", daemon=True
        )
        _state.heartbeat.start()


def _beat_forever() -> None:
    while True:
        time.sleep(HEARTBEAT_SECONDS)
        try:
            line_lease_renew()
            stranded_lines_recover()
        except Exception:  # Redis away: the next beat tries again
            logger.warning("line lease heartbeat failed", exc_info=True)


def line_lease_renew() -> None:
    """Keep this process's lines its own for another lease, and drop the records of the
    sends that have left them."""
    with _state.lock:
        owner = _state.identity()
        gone = _state.left_take(keep_recent=True)
    pipe = get_redis_connection("default").pipeline(transaction=False)
    if gone:
        pipe.hdel(_lines_key(owner), *gone)
    pipe.set(_alive_key(owner), "1", ex=LEASE_SECONDS)
    pipe.execute()


def stranded_lines_recover() -> int:
    """Publish again the waiting sends recorded by workers whose lease expired; returns
    how many send messages were published."""
    send_defer = _publisher[0]
    if send_defer is None:  # no send pipeline in this process: nothing to publish with
        return 0
    client = get_redis_connection("default")
    owners = [o.decode() if isinstance(o, bytes) else o for o in client.smembers(OWNERS_KEY)]
    if not owners:
        return 0
    pipe = client.pipeline(transaction=False)
    for owner in owners:
        pipe.exists(_alive_key(owner))
    dead = [owner for owner, alive in zip(owners, pipe.execute(), strict=True) if not alive]
    published = 0
    for owner in dead:
        if not client.set(_recovery_lock_key(owner), "1", nx=True, ex=RECOVERY_LOCK_SECONDS):
            continue  # another worker recovers it
        sent: list[bytes] = []
        for token, raw in client.hgetall(_lines_key(owner)).items():
            record = json.loads(raw)
            if send_defer(
                delivery_id=record["work"],
                channel=record["channel"],
                queue=record["queue"],
                countdown=None,
            ):
                sent.append(token)
                published += 1
        if sent:
            client.hdel(_lines_key(owner), *sent)
        if not client.exists(_lines_key(owner)):
            client.srem(OWNERS_KEY, owner)
        logger.warning("published again %s sends a lost worker held in lines: %s", len(sent), owner)
    return published


def line_record_close() -> None:
    """At a clean exit: drop this process's record if its lines are empty by now (they
    were handed back to the broker as the worker shut down)."""
    with _state.lock:
        if not _state.owner or _state.pid != os.getpid():
            return
        owner = _state.owner
        gone = _state.left_take()
    try:
        client = get_redis_connection("default")
        if gone:
            client.hdel(_lines_key(owner), *gone)
        if not client.exists(_lines_key(owner)):
            client.delete(_alive_key(owner))
            client.srem(OWNERS_KEY, owner)
    except Exception:  # the lease expires; a recoverer publishes what is left (claimed)
        logger.warning("could not clear this worker's line record", exc_info=True)


def line_record_forget() -> None:
    """Drop this process's record whatever it holds (a test's lines are not sends)."""
    with _state.lock:
        owner = _state.identity()
        _state.left_take()
    client = get_redis_connection("default")
    client.delete(_lines_key(owner), _alive_key(owner))
    client.srem(OWNERS_KEY, owner)


atexit.register(line_record_close)
