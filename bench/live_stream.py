"""The live stream scenario: BENCH_STREAMS open SSE connections on one stream server.

scripts/stream.sh as shipped (STREAM_CONCURRENCY processes on one host), with the
per-user limit raised for the run so that all the streams can be one person's: then a
single feed entry (one notification's in-app write, through the shipped feed service
and its Redis wake-up) must reach every one of them. Printed: how long opening took,
the server's memory per open stream (resident memory of its process group, and of
Redis, before and after), the notification's arrival at the first, the median and the
last stream, and how many never got it within BENCH_STREAM_TIMEOUT.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import time
from typing import TYPE_CHECKING

from bench.config import DEMO_USER, LOOPBACK, BenchError, env_float, env_int
from bench.processes import Proc, wait_http
from bench.report import phase
from scripts.ports import unused_port

if TYPE_CHECKING:  # bench.runner imports the scenarios to run them
    from bench.runner import Bench

OPEN_AT_ONCE = 100  # connects in flight at a time: a burst, not a SYN flood


def group_rss_bytes(proc: Proc) -> int:
    """Resident memory of every process in `proc`'s process group (the server and its
    workers), from /proc."""
    pgid = os.getpgid(proc.popen.pid)
    total = 0
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if os.getpgid(int(pid)) != pgid:
                continue
            with open(f"/proc/{pid}/status") as status:
                for line in status:
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1]) * 1024
        except (OSError, ProcessLookupError):
            continue
    return total


def redis_used_memory() -> int:
    """Redis's used_memory, in bytes (the server is shared: a rough figure)."""
    from django_redis import get_redis_connection

    return int(get_redis_connection("default").info("memory")["used_memory"])


class Stream:
    """One SSE client: its connection, and when the bench's event reached it."""

    def __init__(self) -> None:
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None
        self.got_at: float | None = None

    async def open(self, port: int, path: str, token: str) -> None:
        self.reader, self.writer = await asyncio.open_connection(LOOPBACK, port)
        self.writer.write(
            f"GET {path} HTTP/1.1\r\nHost: {LOOPBACK}\r\nAccept: text/event-stream\r\n"
            f"Authorization: Bearer {token}\r\n\r\n".encode()
        )
        await self.writer.drain()
        head = await self.reader.readuntil(b"\r\n\r\n")
        if not head.startswith(b"HTTP/1.1 200"):
            raise BenchError(f"stream refused: {head.splitlines()[0]!r}")
        await self.reader.readuntil(b"retry:")  # the stream's first event: it is live

    async def wait_event(self, marker: bytes) -> None:
        assert self.reader is not None
        await self.reader.readuntil(marker)
        self.got_at = time.perf_counter()

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()


async def _open_all(streams: list[Stream], port: int, path: str, token: str) -> None:
    gate = asyncio.Semaphore(OPEN_AT_ONCE)

    async def one(stream: Stream) -> None:
        async with gate:
            await stream.open(port, path, token)

    await asyncio.gather(*(one(s) for s in streams))


def _write_feed_entry(title: str) -> None:
    """One notification's in-app entry for the demo user, as the in-app channel writes
    it (the feed service publishes the wake-up after commit)."""
    from bench.views import BENCH_CATEGORY, BENCH_PRODUCER
    from notify.feed import feed_entry_create
    from notify.models import Category, Notification, Producer, Recipient

    notification = Notification.objects.create(
        producer=Producer.objects.get(name=BENCH_PRODUCER),
        event_id=f"stream-{time.time_ns()}",
        recipient=Recipient.objects.get(user_id=DEMO_USER),
        category=Category.objects.get(key=BENCH_CATEGORY),
        payload={},
        fingerprint="",
    )
    feed_entry_create(notification=notification, title=title, body="", url="")


async def _measure(bench: Bench, server: Proc, port: int, count: int, timeout: float) -> None:
    from asgiref.sync import sync_to_async

    from notify.models import Recipient
    from notify.tokens import user_token_issue

    recipient_id = await sync_to_async(
        lambda: Recipient.objects.get(user_id=DEMO_USER).pk, thread_sensitive=True
    )()
    token = user_token_issue(recipient_id=recipient_id)
    path = f"/v1/users/{DEMO_USER}/stream"
    rss_before, redis_before = group_rss_bytes(server), redis_used_memory()
    streams = [Stream() for _ in range(count)]
    started = time.perf_counter()
    try:
        await _open_all(streams, port, path, token)
        opened = time.perf_counter() - started
        await asyncio.sleep(2)  # settled: buffers allocated, nothing in flight
        rss_after, redis_after = group_rss_bytes(server), redis_used_memory()
        title = f"bench-stream-{time.time_ns()}"
        waits = [asyncio.create_task(s.wait_event(title.encode())) for s in streams]
        sent = time.perf_counter()
        await sync_to_async(_write_feed_entry, thread_sensitive=True)(title)
        _, pending = await asyncio.wait(waits, timeout=timeout)
        for task in pending:
            task.cancel()
    finally:
        for stream in streams:
            stream.close()
    arrived = sorted(s.got_at - sent for s in streams if s.got_at is not None)
    missed = count - len(arrived)
    print(
        f"stream: {count} open SSE streams on one host (scripts/stream.sh, "
        f"STREAM_CONCURRENCY={env_int('STREAM_CONCURRENCY', 1)}), opened in {opened:.1f} s"
    )
    print(
        f"stream: memory per open stream {(rss_after - rss_before) / count / 1024:.1f} KiB "
        f"in the server ({rss_before / 2**20:.0f} -> {rss_after / 2**20:.0f} MiB), "
        f"{(redis_after - redis_before) / count / 1024:.1f} KiB in Redis"
    )
    if arrived:
        print(
            f"stream: one notification reached {len(arrived)} of {count} streams; first "
            f"{arrived[0] * 1000:.0f} ms, median {statistics.median(arrived) * 1000:.0f} ms, "
            f"last {arrived[-1] * 1000:.0f} ms"
            + (f"; {missed} did NOT get it within {timeout:.0f} s" if missed else "")
        )
    else:
        print(f"stream: the notification reached none of the {count} streams (NOT met)")
    if missed:
        raise BenchError(f"{missed} of {count} streams missed the notification")


def scenario_stream(bench: Bench) -> None:
    """Open BENCH_STREAMS streams on scripts/stream.sh, then one notification to all."""
    count = env_int("BENCH_STREAMS", 2000)
    timeout = env_float("BENCH_STREAM_TIMEOUT", 60.0)
    port = unused_port()
    env = {
        **bench.env,
        "HOST": LOOPBACK,
        "PORT": str(port),
        # All the streams are the demo user's, so that one entry is for all of them.
        "NOTIFY_STREAM_MAX_PER_USER": str(count),
    }
    with phase("starting scripts/stream.sh"):
        server = bench.stack.start("stream", ["bash", "scripts/stream.sh"], env)
        wait_http(f"http://{LOOPBACK}:{port}/healthz", server)
    try:
        with phase(f"opening {count} streams, then one notification"):
            asyncio.run(_measure(bench, server, port, count, timeout))
    finally:
        bench.stack.stop(server)
