"""One persistent SMPP bind_transceiver, shared by the threads of one sender process.

Three threads of its own: the keeper (binds, re-binds with backoff, sends enquire_link
when the link has been quiet for the interval and drops a bind whose enquire_link goes
unanswered), the reader (routes every *_resp to the submit waiting for it, answers
enquire_link and unbind, hands deliver_sm to the receipt thread) and the receipt
thread (runs the receipt handler, which may touch the database, then answers the
deliver_sm with the status it returned). Senders call `submit`, which respects the
window (unacknowledged submits) and the adaptive rate.

The PDUs are smpplib's; the socket loop is ours, so several threads can share a bind.
"""

from __future__ import annotations

import contextlib
import logging
import queue
import random
import select
import threading
import time
from collections.abc import Callable
from typing import Any

from smpplib import client as smpp_client
from smpplib import consts as smpp_consts
from smpplib import exceptions as smpp_errors
from smpplib import smpp

from deliveries.channels.sms.smpp.codes import ESME_ROK
from deliveries.channels.sms.smpp.rate import AdaptiveRate
from deliveries.channels.sms.smpp.session_types import (
    AnswerLost,
    SessionConfig,
    SessionUnavailable,
    SubmitAnswer,
    SubmitTimeout,
    _Pending,
)

logger = logging.getLogger(__name__)

# How often the keeper looks at the link, at most (it also wakes on close).
_KEEPER_TICK = 0.25
# How long the reader waits on the socket before looking whether it should stop.
_READ_POLL = 0.25
_LINK_ERRORS = (OSError, smpp_errors.ConnectionError, smpp_errors.PDUError, ValueError)


class SmppSession:
    """A bind that stays up: use `start()` once, `submit()` from any thread, `close()`."""

    def __init__(
        self,
        config: SessionConfig,
        *,
        rate: AdaptiveRate,
        receipt_handler: Callable[[Any], int] | None = None,
    ):
        self.config = config
        self.rate = rate
        self.receipt_handler = receipt_handler
        self.binds = 0  # how many times a bind succeeded (1 + reconnects)
        self._state_lock = threading.Lock()
        self._write_lock = threading.Lock()
        self._client: smpp_client.Client | None = None
        self._generation = 0
        self._pending: dict[int, _Pending] = {}
        self._window = threading.BoundedSemaphore(config.window)
        self._bound = threading.Event()
        self._closing = threading.Event()
        self._last_sent = 0.0
        self._enquire: float | None = None  # when the unanswered enquire_link went out
        self._failures = 0  # binds refused or lost soon after binding, in a row
        self._bound_at = 0.0
        self._receipts: queue.Queue[Any] = queue.Queue()
        self._threads: list[threading.Thread] = []

    # --- lifecycle --------------------------------------------------------------------

    def start(self) -> None:
        for target, name in ((self._keep, "smpp-keeper"), (self._handle_receipts, "smpp-dlr")):
            thread = threading.Thread(target=target, name=name, daemon=True)
            thread.start()
            self._threads.append(thread)

    @property
    def closed(self) -> bool:
        return self._closing.is_set()

    @property
    def bound(self) -> bool:
        return self._bound.is_set()

    @property
    def local_address(self) -> tuple[str, int] | None:
        """Our end of the bind's TCP connection (for logs and the SMSC's view), if bound."""
        client = self._client
        sock = getattr(client, "_socket", None) if client is not None else None
        try:
            return sock.getsockname() if sock is not None else None
        except OSError:
            return None

    def wait_bound(self, timeout: float) -> bool:
        return self._bound.wait(timeout)

    def close(self, *, timeout: float = 2.0) -> None:
        """Unbind politely, stop the threads and close the socket."""
        if self._closing.is_set():
            return
        self._closing.set()
        with self._state_lock:
            client, generation = self._client, self._generation
        if client is not None and self._bound.is_set():
            self._send(client, generation, "unbind")
        self._drop(generation, "closed")
        self._receipts.put(None)
        for thread in self._threads:
            if thread is not threading.current_thread():
                thread.join(timeout)

    # --- sending ----------------------------------------------------------------------

    def submit(self, **fields: Any) -> SubmitAnswer:
        """Send one submit_sm and wait for its answer (status and message id)."""
        if self._closing.is_set():
            raise SessionUnavailable("the SMPP session is closed")
        if not self._bound.wait(self.config.bind_wait):
            raise SessionUnavailable(
                f"not bound to the SMSC {self.config.host}:{self.config.port}"
                f" (waited {self.config.bind_wait:g} s)"
            )
        if not self._window.acquire(timeout=self.config.response_timeout):
            raise SessionUnavailable(f"window of {self.config.window} submits stayed full")
        try:
            wait = self.rate.reserve()
            if wait > 0:
                time.sleep(wait)
            pending = _Pending()
            with self._write_lock:
                with self._state_lock:
                    client, generation = self._client, self._generation
                if client is None:
                    raise SessionUnavailable("the bind was lost")
                pdu = smpp.make_pdu("submit_sm", client=client, **fields)
                self._pending[pdu.sequence] = pending
                try:
                    client.send_pdu(pdu)
                except _LINK_ERRORS as error:
                    self._pending.pop(pdu.sequence, None)
                    self._drop(generation, f"send failed: {error!r}")
                    raise AnswerLost(f"bind lost while sending: {error!r}") from None
                self._last_sent = time.monotonic()
            if not pending.done.wait(self.config.response_timeout):
                self._pending.pop(pdu.sequence, None)
                raise SubmitTimeout(
                    f"no submit_sm_resp in {self.config.response_timeout:g} s"
                    " (the SMSC may have taken it)"
                )
            if pending.lost:
                raise AnswerLost("the bind was lost before the SMSC answered")
            return SubmitAnswer(pending.status, pending.message_id)
        finally:
            self._window.release()

    def _answer(
        self,
        client: smpp_client.Client,
        generation: int,
        command: str,
        sequence: int,
        status: int = ESME_ROK,
    ) -> int | None:
        """Send a response PDU carrying the request's sequence number."""
        return self._send(client, generation, command, sequence=sequence, status=status)

    def _send(
        self,
        client: smpp_client.Client,
        generation: int,
        command: str,
        *,
        sequence: int | None = None,
        status: int = ESME_ROK,
    ) -> int | None:
        """Build and send one PDU under the write lock; its sequence, or None if lost."""
        with self._write_lock:
            try:
                pdu = smpp.make_pdu(command, client=client, status=status)
                if sequence is not None:
                    pdu.sequence = sequence  # smpplib ignores a sequence given to make_pdu
                client.send_pdu(pdu)
            except _LINK_ERRORS as error:
                self._drop(generation, f"send failed: {error!r}")
                return None
            self._last_sent = time.monotonic()
            return pdu.sequence

    # --- the keeper: bind, keep alive, re-bind ------------------------------------------

    def _keep(self) -> None:
        while not self._closing.is_set():
            if not self._bound.is_set():
                if self._failures:
                    delay = self._backoff(self._failures)
                    logger.warning(
                        "SMPP bind to %s:%s: try %s in %.2f s",
                        self.config.host, self.config.port, self._failures + 1, delay,
                    )  # fmt: skip
                    if self._closing.wait(delay):
                        return
                try:
                    self._bind()
                except _LINK_ERRORS as error:
                    self._failures += 1
                    logger.warning("SMPP bind to %s:%s failed: %r",
                                   self.config.host, self.config.port, error)  # fmt: skip
                    continue
                except Exception:  # a bug must not end the keeper: the bind would never return
                    self._failures += 1
                    logger.exception("SMPP bind to %s:%s raised",
                                     self.config.host, self.config.port)  # fmt: skip
                    continue
            else:
                self._keep_alive()
            self._closing.wait(min(_KEEPER_TICK, self.config.enquire_interval / 4))

    def _backoff(self, failures: int) -> float:
        base = min(
            self.config.reconnect_max, self.config.reconnect_base * 2 ** min(failures - 1, 32)
        )
        return base * random.uniform(0.5, 1.0)  # full-ish jitter: binds do not come back in step

    def _bind(self) -> None:
        client = smpp_client.Client(
            self.config.host,
            self.config.port,
            timeout=self.config.response_timeout,
            allow_unknown_opt_params=True,
            logger_name="smpplib.client",
        )
        try:
            client.connect()
            client.bind_transceiver(
                system_id=self.config.system_id,
                password=self.config.password,
                system_type=self.config.system_type,
            )
        except BaseException:
            client.state = smpp_consts.SMPP_CLIENT_STATE_OPEN  # never bound: no warning
            client.disconnect()
            raise
        with self._state_lock:
            if self._closing.is_set():
                client.disconnect()
                return
            self._generation += 1
            self._client = client
            generation = self._generation
            self._enquire = None
            self._last_sent = time.monotonic()
        self._bound_at = time.monotonic()
        self.binds += 1
        reader = threading.Thread(
            target=self._read, args=(client, generation), name="smpp-reader", daemon=True
        )
        reader.start()
        self._bound.set()
        logger.info("SMPP bound to %s:%s as %s from %s", self.config.host, self.config.port,
                    self.config.system_id, self.local_address)  # fmt: skip

    def _keep_alive(self) -> None:
        with self._state_lock:
            client, generation, enquire = self._client, self._generation, self._enquire
        if client is None:
            return
        now = time.monotonic()
        if enquire is not None:
            if now - enquire > self.config.response_timeout:
                self._drop(generation, "enquire_link went unanswered")
            return
        if now - self._last_sent >= self.config.enquire_interval:
            # Marked before sending so the answer, however fast, finds it.
            with self._state_lock:
                self._enquire = now
            self._send(client, generation, "enquire_link")

    def _drop(self, generation: int, why: str) -> None:
        """Forget a bind (once): fail its waiting submits; the keeper binds anew."""
        with self._state_lock:
            if generation != self._generation or self._client is None:
                return
            client = self._client
            self._client = None
            self._generation += 1
            self._bound.clear()
            pending, self._pending = self._pending, {}
            # A bind that dies young counts as a failure, so a flapping SMSC gets the
            # backoff too; one that lived a while is re-bound at once.
            lived = time.monotonic() - self._bound_at
            self._failures = self._failures + 1 if lived < self.config.enquire_interval else 0
        for waiter in pending.values():
            waiter.lost = True
            waiter.done.set()
        if not self._closing.is_set():
            logger.warning("SMPP bind to %s:%s lost: %s", self.config.host, self.config.port, why)
        client.state = smpp_consts.SMPP_CLIENT_STATE_OPEN  # we unbound or lost it: no warning
        with contextlib.suppress(*_LINK_ERRORS):
            client.disconnect()

    # --- the reader -----------------------------------------------------------------------

    def _read(self, client: smpp_client.Client, generation: int) -> None:
        sock = client._socket  # smpplib reads blocking; we poll so close() can stop us
        while self._generation == generation and not self._closing.is_set():
            try:
                readable, _, _ = select.select([sock], [], [], _READ_POLL)
                if not readable:
                    continue
                pdu = client.read_pdu()
            except smpp_errors.UnknownCommandError as error:
                # The whole PDU was read (by its length): the stream is still in step.
                logger.warning("SMPP: unknown PDU from the SMSC ignored: %s", error)
                continue
            # AttributeError: the bind was dropped (socket gone) while we were reading.
            except (*_LINK_ERRORS, AttributeError) as error:
                self._drop(generation, f"read failed: {error!r}")
                return
            try:
                self._dispatch(client, generation, pdu)
            except Exception:  # a bug here must not silently stop the reading
                logger.exception("SMPP: could not handle %s", getattr(pdu, "command", pdu))

    def _dispatch(self, client: smpp_client.Client, generation: int, pdu: Any) -> None:
        command = pdu.command
        if command == "enquire_link_resp":
            with self._state_lock:  # any answer proves the link is alive
                self._enquire = None
        elif command in ("submit_sm_resp", "generic_nack"):
            waiter = self._pending.pop(pdu.sequence, None)
            if waiter is not None:
                waiter.status = int(pdu.status)
                waiter.message_id = _text(getattr(pdu, "message_id", None))
                waiter.done.set()
        elif command == "deliver_sm":
            self._receipts.put((client, generation, pdu))
        elif command == "enquire_link":
            self._answer(client, generation, "enquire_link_resp", pdu.sequence)
        elif command == "unbind":
            self._answer(client, generation, "unbind_resp", pdu.sequence)
            self._drop(generation, "the SMSC unbound us")
        elif command != "unbind_resp":
            logger.warning("SMPP: unhandled %s from the SMSC", command)

    # --- receipts -------------------------------------------------------------------------

    def _handle_receipts(self) -> None:
        try:
            while True:
                item = self._receipts.get()
                if item is None:
                    return
                client, generation, pdu = item
                status = ESME_ROK
                if self.receipt_handler is not None:
                    try:
                        status = self.receipt_handler(pdu)
                    except Exception:
                        logger.exception("SMPP: receipt handler failed; the SMSC will resend")
                        status = 0x64  # ESME_RX_T_APPN: keep it, try again later
                if self._generation == generation:
                    self._answer(client, generation, "deliver_sm_resp", pdu.sequence, status)
        finally:
            # This thread's own database connection, if the handler opened one.
            from django.db import connections

            connections.close_all()


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bytes):
        return value.decode("ascii", "replace")
    return str(value)
