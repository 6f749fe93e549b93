"""Wake-ups of the live stream: one Redis pub/sub connection per server process for
every open stream in it.

A new feed entry is followed by a PUBLISH on its recipient's channel
(notify.unread.feed_channel). The process subscribes each channel once, however many
streams of that recipient are open, and one reader task wakes the streams waiting on
it. A connection per stream would instead bound the streams a host can hold by the
Redis pool (and Redis's own client limit), and cost a socket and its buffers each.

When Redis cannot be reached, or the shared connection breaks, every stream is woken
(it reads the feed once more) and falls back to polling until a later wait subscribes
again: the stream never depends on pub/sub alone.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import weakref
from dataclasses import dataclass, field

from django.conf import settings
from redis.exceptions import RedisError

from stream.limits import stream_redis

logger = logging.getLogger(__name__)

# Bounds one wait of the reader, so that it notices a pub/sub left with no channel.
_READ_WAIT_SECONDS = 1.0


@dataclass(eq=False)
class FeedSubscription:
    """One stream's interest in one channel: set when the channel was published to, or
    when the shared connection broke (`alive` then False: poll, subscribe again later)."""

    channel: str
    woken: asyncio.Event = field(default_factory=asyncio.Event)
    alive: bool = True


class FeedWakeupHub:
    """The process's shared subscriber (one per event loop): `join` a channel, wait on
    the subscription's event, `leave` it when the stream ends."""

    def __init__(self) -> None:
        self._pubsub = None
        self._reader: asyncio.Task | None = None
        self._members: dict[str, set[FeedSubscription]] = {}
        self._lock = asyncio.Lock()
        # After a failure, streams poll until then instead of each waiting in turn for
        # Redis's connect timeout under the lock.
        self._retry_at = 0.0

    async def join(self, channel: str) -> FeedSubscription | None:
        """Subscribed (once the SUBSCRIBE is sent: a PUBLISH after this returns is
        seen), or None when Redis cannot be reached."""
        subscription = FeedSubscription(channel)
        async with self._lock:
            if self._pubsub is None and time.monotonic() < self._retry_at:
                return None
            try:
                if self._pubsub is None:
                    self._pubsub = stream_redis().pubsub()
                if channel not in self._members:
                    await self._pubsub.subscribe(channel)
                    self._members[channel] = set()
            except RedisError:
                await self._break()
                return None
            self._members[channel].add(subscription)
            if self._reader is None or self._reader.done():
                self._reader = asyncio.create_task(self._read(self._pubsub))
        return subscription

    async def leave(self, subscription: FeedSubscription) -> None:
        """The stream ended: the channel is unsubscribed when it was the last one's."""
        async with self._lock:
            members = self._members.get(subscription.channel)
            if members is None or subscription not in members:
                return
            members.discard(subscription)
            if not members:
                del self._members[subscription.channel]
                try:
                    await self._pubsub.unsubscribe(subscription.channel)
                except RedisError:
                    await self._break()

    async def _read(self, pubsub) -> None:
        try:
            while self._pubsub is pubsub:
                message = await pubsub.get_message(
                    ignore_subscribe_messages=True, timeout=_READ_WAIT_SECONDS
                )
                if message is None:
                    continue
                channel = message["channel"]
                if isinstance(channel, bytes):
                    channel = channel.decode()
                for subscription in self._members.get(channel, ()):
                    subscription.woken.set()
        except Exception as error:  # whatever ends the reader, the streams poll
            if self._pubsub is not pubsub:
                return  # a connection already given up; a newer one may serve now
            logger.warning("live stream wake-ups: Redis connection lost (%r); polling", error)
            async with self._lock:
                if self._pubsub is pubsub:
                    await self._break()

    async def _break(self) -> None:
        """Forget the connection; wake every stream, which polls until it joins again."""
        pubsub, self._pubsub = self._pubsub, None
        members, self._members = self._members, {}
        self._retry_at = time.monotonic() + settings.NOTIFY_STREAM_POLL_INTERVAL
        for subscriptions in members.values():
            for subscription in subscriptions:
                subscription.alive = False
                subscription.woken.set()
        if pubsub is not None:
            with contextlib.suppress(RedisError, OSError):
                await pubsub.aclose()


_hubs: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, FeedWakeupHub] = (
    weakref.WeakKeyDictionary()
)


def feed_wakeup_hub() -> FeedWakeupHub:
    """This event loop's (this server process's) shared subscriber."""
    loop = asyncio.get_running_loop()
    hub = _hubs.get(loop)
    if hub is None:
        hub = _hubs[loop] = FeedWakeupHub()
    return hub
