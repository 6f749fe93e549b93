"""`GET /v1/users/{user_id}/stream?device_id=`: the feed, live, over Server-Sent Events.

Runs under ASGI as an async view. Each event's `id` is the feed entry id and its `data`
the feed entry JSON; `Last-Event-ID` replays what was missed; a comment line every
NOTIFY_STREAM_HEARTBEAT keeps proxies from closing an idle stream and renews the
device's entry in the live registry, which the push sender reads.

Bounds (stream.limits): at most NOTIFY_STREAM_MAX_PER_USER open streams
per user and NOTIFY_STREAM_MAX_PER_KEY per API key (the next one is refused with 429);
after NOTIFY_STREAM_MAX_LIFETIME the server ends the stream with jittered `retry:`
advice, and the client's reconnect is authenticated again (a revoked key or an expired
token ends there). All streams of a process share one Redis pool.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import re
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TypeVar

from asgiref.sync import sync_to_async
from django.conf import settings
from django.core.handlers.asgi import ASGIRequest
from django.core.serializers.json import DjangoJSONEncoder
from django.db import close_old_connections, connection
from django.http import HttpRequest, HttpResponseBase, JsonResponse, StreamingHttpResponse
from django.views.decorators.csrf import csrf_exempt

from deliveries.models import Device
from deliveries.pipeline.live import (
    device_live_clear,
    device_live_mark,
    feed_entries_mark_seen_by,
    feed_entry_mark_seen,
)
from notify.api.auth import api_key_scope_refusal
from notify.api.errors import ApiError, error_body
from notify.api.lookups import user_id_checked
from notify.api_keys import api_key_authenticate
from notify.feed import feed_entry_document
from notify.guard import recipient_reach_refusal
from notify.models import FeedEntry, Recipient, Scope
from notify.tokens import USER_TOKEN_PREFIX, user_token_recipient_id
from notify.unread import feed_channel
from stream.limits import (
    StreamSlot,
    TooManyStreams,
    reconnect_after_ms,
    stream_lifetime,
    stream_slot_release,
    stream_slot_renew,
    stream_slot_take,
)
from stream.wakeups import FeedSubscription, feed_wakeup_hub

T = TypeVar("T")

# Feed entry and device ids are bigints: 1 to 18 ASCII digits always fit.
_ID = re.compile(r"[0-9]{1,18}")


def _in_thread(fn: Callable[..., T]) -> Callable[..., Awaitable[T]]:
    """`fn` run off the event loop (in the request's thread, as Django runs sync code),
    its database connection back in the pool as soon as it returns.

    A stream is open for up to an hour and reads the database only now and then, while
    Django gives a request's connection back only when the response ends: handing it
    back after each read keeps thousands of open streams from leaning on the process's
    few pooled connections.
    """

    def run(*args: object, **kwargs: object) -> T:
        try:
            return fn(*args, **kwargs)
        finally:
            # As at a request's end: with the pool on, handed back (CONN_MAX_AGE 0);
            # without it, a persistent connection is kept for its age. Never inside a
            # transaction (none in a request; a test's own, under the test client).
            if not connection.in_atomic_block:
                close_old_connections()

    return sync_to_async(run)


def _error(status: int, code: str, message: str, field: str | None = None) -> JsonResponse:
    return JsonResponse(error_body(code, message, field), status=status)


def _authorized_recipient(
    request: HttpRequest, user_id: str
) -> tuple[Recipient, int | None] | JsonResponse:
    """(recipient, API key id or None) for a producer key, or the end user's own token."""
    scheme, _, token = request.headers.get("Authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not token:
        return _error(401, "not_authenticated", "Use 'Authorization: Bearer <token>'.")
    try:
        user_id_checked(user_id)
    except ApiError as error:
        return _error(400, error.error_code, str(error.detail), error.field)
    recipient = Recipient.objects.filter(user_id=user_id).first()
    if token.startswith(USER_TOKEN_PREFIX):
        owner = user_token_recipient_id(token)
        if owner is None:
            return _error(401, "authentication_failed", "Invalid or expired user token.")
        if recipient is None or recipient.pk != owner:
            return _error(403, "permission_denied", "This user token may not read this stream.")
        return recipient, None
    api_key = api_key_authenticate(key=token)
    if api_key is None:
        return _error(401, "authentication_failed", "Unknown or revoked API key.")
    refusal = api_key_scope_refusal(api_key, Scope.USERS_READ)
    if refusal is not None:
        return _error(403, "missing_scope", refusal)
    refusal = recipient_reach_refusal(producer=api_key.producer, user_id=user_id)
    if refusal is not None:
        return _error(403, "recipient_not_granted", refusal)
    if recipient is None:
        return _error(404, "unknown_recipient", f"No recipient with user_id {user_id!r}.")
    return recipient, api_key.pk


def _entries_after(recipient_id: int, after: int) -> list[dict]:
    """Feed entries newer than `after`, oldest first (a fresh stream starts at the newest)."""
    rows = FeedEntry.objects.filter(recipient_id=recipient_id, pk__gt=after).order_by("pk")[
        : settings.NOTIFY_STREAM_REPLAY_MAX
    ]
    return [feed_entry_document(entry) for entry in rows]


def _newest_id(recipient_id: int) -> int:
    newest = FeedEntry.objects.filter(recipient_id=recipient_id).order_by("-pk").first()
    return newest.pk if newest else 0


def _prepare(request: HttpRequest, user_id: str):
    authorized = _authorized_recipient(request, user_id)
    if isinstance(authorized, JsonResponse):
        return authorized, None, None, None
    found, api_key_id = authorized
    raw_device = request.GET.get("device_id", "")
    device = None
    if raw_device:
        if not _ID.fullmatch(raw_device):
            message = "device_id must be a device id."
            return _error(400, "invalid", message, "device_id"), None, None, None
        device = Device.objects.filter(pk=int(raw_device), recipient=found).first()
        if device is None:
            message = "No such device."
            return _error(404, "unknown_device", message, "device_id"), None, None, None
    last = request.headers.get("Last-Event-ID", "").strip()
    if last and not _ID.fullmatch(last):
        message = "Last-Event-ID must be the id of a feed event."
        return _error(400, "invalid", message, "Last-Event-ID"), None, None, None
    cursor = int(last) if last else _newest_id(found.pk)
    return found, device, cursor, api_key_id


# Authenticated by its Authorization header, never by a cookie: nothing for CSRF to guard,
# and another method meets the 405 below rather than the CSRF check's HTML page.
@csrf_exempt
async def stream(request: HttpRequest, user_id: str) -> HttpResponseBase:
    if request.method != "GET":
        refused = _error(405, "method_not_allowed", "Use GET.")
        refused["Allow"] = "GET"  # RFC 9110: a 405 names the methods the resource has
        return refused
    recipient, device, cursor, api_key_id = await _in_thread(_prepare)(request, user_id)
    if isinstance(recipient, JsonResponse):
        return recipient
    if not isinstance(request, ASGIRequest):
        # Under a WSGI server (scripts/web.sh) a stream would hold a sync worker for its
        # whole life until the worker's timeout killed it: the proxy sends this path to
        # scripts/stream.sh (docs/web-tier.md), so one that arrives here was misrouted (its
        # errors above are still answered here, as they would be there).
        return _error(
            503,
            "stream_elsewhere",
            "The live stream is served by the stream process (ASGI); route this path there.",
        )
    connection_id = uuid.uuid4().hex
    try:
        slot = await stream_slot_take(
            recipient_id=recipient.pk, api_key_id=api_key_id, connection_id=connection_id
        )
    except TooManyStreams as refused:
        response = _error(429, "too_many_streams", str(refused))
        response["Retry-After"] = str(math.ceil(reconnect_after_ms() / 1000))
        return response
    response = StreamingHttpResponse(
        _events(recipient.pk, device.pk if device else None, cursor, slot),
        content_type="text/event-stream",
    )
    response["Cache-Control"] = "no-cache"
    response["X-Accel-Buffering"] = "no"  # nginx: do not buffer the stream
    return response


# An end-user token reaches the stream, as it reaches views that declare so: the
# cross-origin middleware reads this flag to answer the inbox's browsers here.
stream.user_token_allowed = True  # type: ignore[attr-defined]


async def _events(
    recipient_id: int, device_id: int | None, cursor: int, slot: StreamSlot
) -> AsyncIterator[str]:
    connection_id = slot.connection_id
    ends_at = time.monotonic() + stream_lifetime()
    mark = _in_thread(device_live_mark)
    fetch = _in_thread(_entries_after)
    seen = _in_thread(feed_entry_mark_seen)
    seen_by = _in_thread(feed_entries_mark_seen_by)
    wakeups = _FeedWakeups(recipient_id)
    try:
        if device_id is not None:
            await mark(device_id=device_id, connection_id=connection_id)
        # Subscribed before the first read: an entry written in between is not missed.
        await wakeups.open()
        yield f"retry: {reconnect_after_ms()}\n\n"
        beat = time.monotonic()
        while True:
            written = []
            for entry in await fetch(recipient_id, cursor):
                cursor = entry["id"]
                data = json.dumps(entry, cls=DjangoJSONEncoder, ensure_ascii=False)
                yield f"id: {entry['id']}\nevent: feed\ndata: {data}\n\n"
                if device_id is not None:
                    # Resumed only once the server took the event: the device has it, and
                    # the push sender may skip this notification's push.
                    await seen(device_id=device_id, entry_id=entry["id"])
                written.append(entry["id"])
            if written:
                # The person has seen these (a delay if unread no longer sends them).
                await seen_by(recipient_id=recipient_id, entry_ids=written)
            if time.monotonic() >= ends_at:
                # The client reconnects after `retry` with Last-Event-ID, and that new
                # request is authenticated again.
                yield f"retry: {reconnect_after_ms()}\n: lifetime reached, reconnect\n\n"
                return
            until_beat = settings.NOTIFY_STREAM_HEARTBEAT - (time.monotonic() - beat)
            if until_beat <= 0:
                beat = time.monotonic()
                if device_id is not None:
                    await mark(device_id=device_id, connection_id=connection_id)
                await stream_slot_renew(slot)
                yield ": heartbeat\n\n"
                until_beat = settings.NOTIFY_STREAM_HEARTBEAT
            await wakeups.wait(max_seconds=min(until_beat, ends_at - time.monotonic()))
    finally:
        # Runs on client disconnect too (Django cancels the stream): pushes resume.
        await wakeups.close()
        await stream_slot_release(slot)
        if device_id is not None:
            device_live_clear(device_id=device_id, connection_id=connection_id)


class _FeedWakeups:
    """Waits until the recipient's feed may have something new.

    Woken at once by the PUBLISH that follows each new entry (through the process's one
    shared subscriber, stream.wakeups); without one it still returns
    after NOTIFY_STREAM_SAFETY_POLL, and polls every NOTIFY_STREAM_POLL_INTERVAL while
    Redis cannot be reached, so the stream never depends on pub/sub alone.
    """

    def __init__(self, recipient_id: int) -> None:
        self.channel = feed_channel(recipient_id)
        self.subscription: FeedSubscription | None = None

    async def open(self) -> None:
        self.subscription = await feed_wakeup_hub().join(self.channel)

    async def wait(self, *, max_seconds: float) -> None:
        if self.subscription is None or not self.subscription.alive:
            await asyncio.sleep(min(max_seconds, settings.NOTIFY_STREAM_POLL_INTERVAL))
            await self.open()  # Redis back: woken by pub/sub again
            return
        woken = self.subscription.woken
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(
                woken.wait(), timeout=min(max_seconds, settings.NOTIFY_STREAM_SAFETY_POLL)
            )
        woken.clear()

    async def close(self) -> None:
        subscription, self.subscription = self.subscription, None
        if subscription is not None:
            await feed_wakeup_hub().leave(subscription)
