"""A total deadline for one provider call, and a bounded read of its answer.

Socket timeouts are per read: a peer that drips one byte every few seconds never trips
them and holds a sender thread for as long as it likes. The only way to end a blocked
read from outside is to shut its socket down, so a call runs under `call_deadline`: a
timer that, when the deadline passes, shuts down every socket the call registered
(`deadline_watch`). The blocked read returns at once, the call fails, and the caller
learns from `CallWatch.expired` that it was the deadline, not the peer, that ended it.
One watchdog thread per process keeps every call's deadline.

`BoundedAdapter` applies this to `requests` (Web Push, FCM): each request runs under
its own deadline (firebase-admin sends a batch from a thread pool, so the deadline
belongs to the request, not to the calling thread), and reads at most `max_bytes` of
the answer before anything parses it — never `response.text` of any size.
Email's SMTP sockets join the deadline the same way (deliveries/channels/smtp.py).
"""

from __future__ import annotations

import contextlib
import heapq
import itertools
import socket
import threading
import time
from collections.abc import Iterator
from http.client import RemoteDisconnected
from typing import Any

import requests
from requests.adapters import HTTPAdapter
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool


class DeadlineExceeded(requests.Timeout):
    """The call outlived its total deadline (a transient failure: a timeout)."""


class CallWatch:
    """The sockets of one call; all shut down when its deadline passes, and closed when
    the call is over."""

    def __init__(self) -> None:
        self.expired = False
        self._sockets: list[socket.socket] = []
        self._shut: list[socket.socket] = []
        self._lock = threading.Lock()

    def add(self, sock: socket.socket | None) -> None:
        if sock is None:
            return
        with self._lock:
            if not self.expired:
                self._sockets.append(sock)
                return
            self._shut.append(sock)
        _shutdown(sock)  # registered after the deadline: end it at once

    def expire(self) -> None:
        with self._lock:
            self.expired = True
            sockets, self._sockets = self._sockets, []
            self._shut.extend(sockets)
        for sock in sockets:
            _shutdown(sock)

    def close_expired(self) -> None:
        """Close what the deadline shut down (called by the owner, once the call is over).

        A client that failed half-way does not always close its socket itself (smtplib
        keeps it when the greeting fails), so without this the descriptor and the peer's
        connection would live until the garbage collector comes by.
        """
        with self._lock:
            sockets, self._shut = self._shut, []
        for sock in sockets:
            with contextlib.suppress(OSError):
                sock.close()


def _shutdown(sock: socket.socket) -> None:
    # shutdown(), not close(): it wakes a read blocked in another thread, and the owner
    # still closes the file descriptor itself (no reuse of a number it holds).
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)


class _Watchdog:
    """One thread per process that expires the watches whose deadline passed.

    A timer thread per call would cost every provider call a thread start (and the
    caller waits for that thread to run, which under load takes milliseconds); this one
    sleeps until the earliest deadline and is started once.
    """

    def __init__(self) -> None:
        self._due: list[tuple[float, int, CallWatch]] = []  # a heap by deadline
        self._armed: set[int] = set()  # tickets not disarmed (others leave the heap unseen)
        self._wake = threading.Condition()
        self._thread: threading.Thread | None = None
        self._order = itertools.count()

    def arm(self, watch: CallWatch, seconds: float) -> int:
        """Expire `watch` in `seconds` unless `disarm`ed first; returns its ticket."""
        ticket = next(self._order)
        with self._wake:
            if self._thread is None or not self._thread.is_alive():  # also after a fork
                self._thread = threading.Thread(
                    target=self._run, name="provider-deadlines", daemon=True
                )
                self._thread.start()
            heapq.heappush(self._due, (time.monotonic() + seconds, ticket, watch))
            self._armed.add(ticket)
            if self._due[0][1] == ticket:  # the new earliest: sleep less
                self._wake.notify()
        return ticket

    def disarm(self, ticket: int) -> None:
        with self._wake:
            self._armed.discard(ticket)

    def _run(self) -> None:
        while True:
            with self._wake:
                while self._due and self._due[0][1] not in self._armed:
                    heapq.heappop(self._due)
                if not self._due:
                    self._wake.wait()
                    continue
                at, ticket, watch = self._due[0]
                left = at - time.monotonic()
                if left > 0:
                    self._wake.wait(left)
                    continue
                heapq.heappop(self._due)
                self._armed.discard(ticket)
            watch.expire()  # outside the lock: shutting sockets down may take a moment


_watchdog = _Watchdog()
_current = threading.local()


class call_deadline:  # lower case: read as a function, `with call_deadline(30) as watch:`
    """Run the block under a total deadline; sockets it registers are shut down at it.

    A class rather than a generator context manager: it wraps every email and push
    request, and a generator's setup costs several times these few statements."""

    __slots__ = ("_previous", "_seconds", "_ticket", "_watch")

    def __init__(self, seconds: float) -> None:
        self._seconds = seconds

    def __enter__(self) -> CallWatch:
        self._watch = CallWatch()
        self._previous = getattr(_current, "watch", None)
        _current.watch = self._watch
        self._ticket = _watchdog.arm(self._watch, self._seconds)
        return self._watch

    def __exit__(self, *_exc: object) -> None:
        _watchdog.disarm(self._ticket)
        _current.watch = self._previous
        self._watch.close_expired()


def deadline_watch(sock: socket.socket | None) -> None:
    """Put a socket under the current call's deadline (no-op outside `call_deadline`)."""
    watch = getattr(_current, "watch", None)
    if watch is not None:
        watch.add(sock)


class KeptConnectionLost(RemoteDisconnected):
    """A kept connection was closed or reset before a byte of the answer to the request
    sent on it arrived (`BoundedAdapter` sends that request once more on a new one)."""


class _Watched:
    """Mixed into urllib3's connections: the socket joins the current call's deadline at
    connect and again before each answer is awaited (a pooled connection carries over
    from an earlier call, which had its own watch). A connection that has carried an
    answer and then loses the next one before its first byte says so (`KeptConnectionLost`)."""

    sock: socket.socket | None
    answered = False  # this socket has carried an answer: it is a kept connection
    answered_at = 0.0  # time.monotonic() of its last answer

    def connect(self) -> None:
        super().connect()  # type: ignore[misc]
        self.answered = False
        deadline_watch(self.sock)

    def getresponse(self) -> Any:
        deadline_watch(self.sock)
        try:
            response = super().getresponse()  # type: ignore[misc]
        except (ConnectionResetError, BrokenPipeError) as error:  # RemoteDisconnected too
            if self.answered:
                raise KeptConnectionLost(
                    f"kept connection lost before the answer: {error}"
                ) from error
            raise
        self.answered = True
        self.answered_at = time.monotonic()
        return response


class _WatchedConnection(_Watched, HTTPConnection):
    pass


class _WatchedTlsConnection(_Watched, HTTPSConnection):
    pass


class _NewWhenAsked:
    """Mixed into urllib3's pools: a kept connection taken from the pool is closed first,
    so the request opens a new one, inside `_new_connection()` and when it has been idle
    longer than `kept_idle_max` seconds (urllib3 does the same with a connection it finds
    dropped). An idle connection is where a half-dead one hides: a NAT or load balancer
    forgot it without a close, and a request sent on it would wait out the deadline."""

    kept_idle_max: float | None = None

    def _get_conn(self, timeout: float | None = None) -> Any:
        conn = super()._get_conn(timeout)  # type: ignore[misc]
        if getattr(_new_only, "on", False) or self._idle_too_long(conn):
            conn.close()
        return conn

    def _idle_too_long(self, conn: Any) -> bool:
        if self.kept_idle_max is None or not getattr(conn, "answered", False):
            return False
        return time.monotonic() - conn.answered_at > self.kept_idle_max


_new_only = threading.local()


@contextlib.contextmanager
def _new_connection() -> Iterator[None]:
    _new_only.on = True
    try:
        yield
    finally:
        _new_only.on = False


class _WatchedPool(_NewWhenAsked, HTTPConnectionPool):
    ConnectionCls = _WatchedConnection


class _WatchedTlsPool(_NewWhenAsked, HTTPSConnectionPool):
    ConnectionCls = _WatchedTlsConnection


# TCP keepalive on kept connections: the kernel probes one idle this long, and gives it up
# after this many unanswered probes this far apart, so a connection whose peer vanished
# without a close reads as dropped (urllib3 then opens a new one) instead of swallowing
# the next request. Where the platform lacks the options, only the idle limit applies.
KEEPALIVE_IDLE_SECONDS = 15
KEEPALIVE_INTERVAL_SECONDS = 5
KEEPALIVE_PROBES = 3


def keepalive_socket_options() -> list[tuple[int, int, int]]:
    """urllib3's default socket options plus TCP keepalive probing (see above)."""
    options = [*HTTPConnection.default_socket_options, (socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)]
    for name, value in (
        ("TCP_KEEPIDLE", KEEPALIVE_IDLE_SECONDS),
        ("TCP_KEEPINTVL", KEEPALIVE_INTERVAL_SECONDS),
        ("TCP_KEEPCNT", KEEPALIVE_PROBES),
    ):
        if hasattr(socket, name):
            options.append((socket.IPPROTO_TCP, getattr(socket, name), value))
    return options


class BoundedAdapter(HTTPAdapter):
    """A transport with a total deadline per request and a cap on the answer read; a kept
    connection idle longer than `kept_idle_max` seconds is replaced before it is used,
    and the kernel probes idle ones (TCP keepalive)."""

    def __init__(
        self,
        *,
        total_seconds: float,
        max_bytes: int,
        kept_idle_max: float | None = None,
        **kwargs: Any,
    ) -> None:
        self.total_seconds = total_seconds
        self.max_bytes = max_bytes
        self.kept_idle_max = kept_idle_max
        super().__init__(**kwargs)

    def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("socket_options", keepalive_socket_options())
        super().init_poolmanager(*args, **kwargs)
        limit = {"kept_idle_max": self.kept_idle_max}
        self.poolmanager.pool_classes_by_scheme = {
            "http": type("WatchedPool", (_WatchedPool,), limit),
            "https": type("WatchedTlsPool", (_WatchedTlsPool,), limit),
        }

    def send(self, request: requests.PreparedRequest, **kwargs: Any) -> requests.Response:
        kwargs["stream"] = True  # the body is read here, bounded, under the deadline
        with call_deadline(self.total_seconds) as watch:
            try:
                response = self._send_or_resend(request, watch, **kwargs)
                body = bounded_body(response, self.max_bytes)
            except Exception as error:
                if watch.expired:
                    raise DeadlineExceeded(self._late(request)) from error
                raise
        if watch.expired:  # a shut-down socket may read as a short, clean end
            response.close()
            raise DeadlineExceeded(self._late(request))
        response._content = body
        response._content_consumed = True
        return response

    def _send_or_resend(
        self, request: requests.PreparedRequest, watch: CallWatch, **kwargs: Any
    ) -> requests.Response:
        """Send; once more on a new connection if a kept one was lost before answering.

        A server closes a kept connection when it has been idle long enough (or has
        served enough requests); urllib3 drops a pooled connection whose close has
        already arrived, but a close that crosses our request on the wire is seen only
        as that request failing with no byte of answer. The server closed without
        reading it, so it was never processed: sending it again on a new connection is
        safe, and it is what a retry would do anyway, later and at the cost of an
        attempt. Once only, and only a body that can be sent again (bytes), within the
        same deadline; any other failure is the caller's to classify.
        """
        try:
            return super().send(request, **kwargs)
        except requests.ConnectionError as error:
            if watch.expired or not _kept_connection_lost(error):
                raise
            if not isinstance(request.body, bytes | str | None):
                raise
        with _new_connection():
            return super().send(request, **kwargs)

    def _late(self, request: requests.PreparedRequest) -> str:
        return f"no complete answer within {self.total_seconds:g}s (the call's deadline)"


def _kept_connection_lost(error: BaseException) -> bool:
    """Whether the failure began as a `KeptConnectionLost` (requests wraps urllib3's
    ProtocolError, which wraps it)."""
    seen: BaseException | None = error
    while seen is not None:
        if isinstance(seen, KeptConnectionLost):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def bounded_body(response: requests.Response, limit: int) -> bytes:
    """At most `limit` bytes of the answer; a longer one is cut and its connection dropped."""
    try:
        body = response.raw.read(limit + 1, decode_content=True)
    except Exception:
        response.close()
        raise
    if len(body) > limit:
        response.close()  # the rest is never read: the connection cannot be reused
        return body[:limit]
    response.raw.release_conn()  # read to its end: the connection goes back to the pool
    return body
