"""A scripted SMSC speaking SMPP 3.4 over TCP on loopback, for the SMS tests.

Written against the specification, not with the client library, so the tests check
real PDUs on the wire: bind_transceiver(_resp), submit_sm(_resp) with message ids or a
scripted command_status (0x58, 0x0B, …), enquire_link(_resp), unbind(_resp), and
deliver_sm delivery receipts (resent, like a real SMSC, when we answer them with an
error; sent again after an acknowledgement when told to, as a real SMSC does when our
answer was lost or late). Everything it sees is recorded with the time it saw it.
"""

from __future__ import annotations

import asyncio
import itertools
import struct
import threading
import time
from collections import deque
from dataclasses import dataclass, field

BIND_TRANSCEIVER = 0x00000009
SUBMIT_SM = 0x00000004
DELIVER_SM = 0x00000005
UNBIND = 0x00000006
ENQUIRE_LINK = 0x00000015
GENERIC_NACK = 0x80000000
RESP = 0x80000000
TLV_MESSAGE_PAYLOAD = 0x0424
TLV_RECEIPTED_MESSAGE_ID = 0x001E
TLV_MESSAGE_STATE = 0x0427
MESSAGE_STATE = {"DELIVRD": 2, "EXPIRED": 3, "DELETED": 4, "UNDELIV": 5, "REJECTD": 8}


@dataclass
class Submit:
    at: float
    source_addr: str
    destination_addr: str
    esm_class: int
    data_coding: int
    registered_delivery: int
    short_message: bytes
    message_payload: bytes | None
    status: int = 0
    message_id: str = ""
    answered: bool = False  # its submit_sm_resp went out (a delayed one may never)


@dataclass
class Receipt:
    message_id: str
    state: str
    submit: Submit
    sent_at: list[float] = field(default_factory=list)
    answers: list[int] = field(default_factory=list)
    sequence: int = 0  # of the deliver_sm last sent for it


def _pdu(command_id: int, status: int, sequence: int, body: bytes = b"") -> bytes:
    return struct.pack(">IIII", 16 + len(body), command_id, status, sequence) + body


def _cstr(value: str) -> bytes:
    return value.encode("ascii") + b"\x00"


class _Reader:
    def __init__(self, body: bytes):
        self.body, self.pos = body, 0

    def cstr(self) -> str:
        end = self.body.index(b"\x00", self.pos)
        value = self.body[self.pos : end].decode("ascii")
        self.pos = end + 1
        return value

    def byte(self) -> int:
        self.pos += 1
        return self.body[self.pos - 1]

    def octets(self, length: int) -> bytes:
        self.pos += length
        return self.body[self.pos - length : self.pos]

    def tlvs(self) -> dict[int, bytes]:
        found = {}
        while self.pos + 4 <= len(self.body):
            tag, length = struct.unpack(">HH", self.octets(4))
            found[tag] = self.octets(length)
        return found


class Smsc:
    """Start with `start()`; script answers with `answer_next`; read what it saw."""

    def __init__(self, *, system_id: str = "notify", password: str = "secret", port: int = 0):
        self.system_id = system_id
        self.password = password
        self.port = port
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._server: asyncio.base_events.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self._ids = itertools.count(1)
        self.reset()

    # --- control ------------------------------------------------------------------------

    def reset(self) -> None:
        self.binds: list[tuple[float, str]] = []
        self.enquire_links_by_port: dict[int, list[float]] = {}
        self.refused_binds = 0
        self.submits: list[Submit] = []
        self.enquire_links: list[float] = []
        self.unbinds = 0
        self.receipts: dict[str, Receipt] = {}
        self.script: deque[int] = deque()  # statuses for the next submits (then 0)
        self.always: int | None = None  # answer every submit with this status
        self.receipt_state: str | None = "DELIVRD"  # None: send no receipts
        self.receipt_delay = 0.05
        self.receipt_tlvs = True
        self.resend_after = 0.3  # an unanswered/refused receipt comes again after this
        # Each receipt is sent this many times even when acknowledged (a duplicate, as a
        # real SMSC sends when our deliver_sm_resp was lost or came too late).
        self.receipt_copies = 1
        # Like a real SMSC, drop a connection that sends nothing for this long (None: never).
        self.idle_timeout: float | None = None
        self.idle_drops = 0
        self.resend_limit = 10
        # Each submit_sm is answered this many seconds after it arrives (a busy SMSC),
        # the submits behind it read meanwhile; `most_outstanding` is the most submits
        # seen at once still waiting for their answer (the client's window).
        self.submit_delay = 0.0
        self.outstanding = 0
        self.most_outstanding = 0
        # Receipts waiting for their deliver_sm_resp, by (connection, sequence): each
        # bind numbers its own PDUs. Timers of an earlier test are cancelled.
        self._awaiting: dict[tuple[int, int], Receipt] = {}
        timers, self._timers = getattr(self, "_timers", set()), set()
        if timers:
            self._loop.call_soon_threadsafe(lambda: [timer.cancel() for timer in timers])

    def answer_next(self, *statuses: int) -> None:
        self.script.extend(statuses)

    def start(self) -> int:
        self._thread.start()
        ready = asyncio.run_coroutine_threadsafe(self._serve(), self._loop)
        self.port = ready.result(5)
        return self.port

    def stop(self) -> None:
        async def shutdown():
            for writer in list(self._writers):
                writer.close()
            if self._server:
                self._server.close()

        asyncio.run_coroutine_threadsafe(shutdown(), self._loop).result(5)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)

    def drop_connections(self) -> None:
        """Cut every bind at the TCP level, as a restarting SMSC or a NAT would."""

        async def drop():
            for writer in list(self._writers):
                writer.transport.abort()

        asyncio.run_coroutine_threadsafe(drop(), self._loop).result(5)

    @property
    def connections(self) -> int:
        return len(self._writers)

    def accepted(self) -> list[Submit]:
        return [submit for submit in self.submits if submit.status == 0 and submit.answered]

    # --- the protocol -------------------------------------------------------------------

    async def _serve(self) -> int:
        self._server = await asyncio.start_server(
            self._session, "127.0.0.1", self.port, reuse_address=True
        )
        return self._server.sockets[0].getsockname()[1]

    async def _session(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter):
        self._writers.add(writer)
        sequences = itertools.count(1)
        try:
            while True:
                try:
                    header = await asyncio.wait_for(reader.readexactly(16), self.idle_timeout)
                except TimeoutError:
                    self.idle_drops += 1  # the client stayed silent: the SMSC hangs up
                    break
                length, command_id, status, sequence = struct.unpack(">IIII", header)
                body = await reader.readexactly(length - 16)
                self._on_pdu(writer, sequences, command_id, status, sequence, body)
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            self._writers.discard(writer)
            writer.close()

    def _on_pdu(self, writer, sequences, command_id, status, sequence, body):
        now = time.monotonic()
        client_port = writer.get_extra_info("peername")[1]
        if command_id == BIND_TRANSCEIVER:
            fields = _Reader(body)
            system_id, password = fields.cstr(), fields.cstr()
            if (system_id, password) != (self.system_id, self.password):
                self.refused_binds += 1
                writer.write(_pdu(BIND_TRANSCEIVER | RESP, 0x0E, sequence, _cstr("TestSMSC")))
                return
            self.binds.append((now, system_id))
            writer.write(_pdu(BIND_TRANSCEIVER | RESP, 0, sequence, _cstr("TestSMSC")))
        elif command_id == ENQUIRE_LINK:
            self.enquire_links.append(now)
            self.enquire_links_by_port.setdefault(client_port, []).append(now)
            writer.write(_pdu(ENQUIRE_LINK | RESP, 0, sequence))
        elif command_id == UNBIND:
            self.unbinds += 1
            writer.write(_pdu(UNBIND | RESP, 0, sequence))
        elif command_id == SUBMIT_SM:
            self._on_submit(writer, sequences, sequence, body, now)
        elif command_id == DELIVER_SM | RESP:
            receipt = self._awaiting.pop((id(writer), sequence), None)
            if receipt is not None:
                receipt.answers.append(status)
                if status != 0 and len(receipt.sent_at) < self.resend_limit:
                    self._later(self.resend_after, writer, sequences, receipt)
                elif status == 0 and receipt.answers.count(0) < self.receipt_copies:
                    self._later(self.receipt_delay, writer, sequences, receipt)
        elif not command_id & RESP:
            writer.write(_pdu(GENERIC_NACK, 0x03, sequence))

    def _on_submit(self, writer, sequences, sequence, body, now):
        fields = _Reader(body)
        fields.cstr()  # service_type
        fields.byte(), fields.byte()
        source = fields.cstr()
        fields.byte(), fields.byte()
        destination = fields.cstr()
        esm_class = fields.byte()
        fields.byte(), fields.byte()  # protocol_id, priority_flag
        fields.cstr(), fields.cstr()  # schedule_delivery_time, validity_period
        registered_delivery = fields.byte()
        fields.byte()  # replace_if_present_flag
        data_coding = fields.byte()
        fields.byte()  # sm_default_msg_id
        short_message = fields.octets(fields.byte())
        tlvs = fields.tlvs()
        submit = Submit(
            now,
            source,
            destination,
            esm_class,
            data_coding,
            registered_delivery,
            short_message,
            tlvs.get(TLV_MESSAGE_PAYLOAD),
        )
        if self.always is not None:
            submit.status = self.always
        elif self.script:
            submit.status = self.script.popleft()
        self.submits.append(submit)
        if self.submit_delay > 0:
            self.outstanding += 1
            self.most_outstanding = max(self.most_outstanding, self.outstanding)
            timers = self._timers
            timer = self._loop.call_later(
                self.submit_delay,
                lambda: (
                    timers.discard(timer),
                    self._answer_submit(writer, sequences, sequence, submit, late=True),
                ),
            )
            timers.add(timer)
            return
        self._answer_submit(writer, sequences, sequence, submit)

    def _answer_submit(self, writer, sequences, sequence, submit: Submit, *, late=False):
        if late:
            self.outstanding -= 1
            if writer.is_closing():
                return  # the bind is gone: the answer never comes
        submit.answered = True
        if submit.status:
            writer.write(_pdu(SUBMIT_SM | RESP, submit.status, sequence, b"\x00"))
            return
        submit.message_id = f"SMSC{next(self._ids):06d}"
        writer.write(_pdu(SUBMIT_SM | RESP, 0, sequence, _cstr(submit.message_id)))
        if submit.registered_delivery & 0x01 and self.receipt_state:
            receipt = Receipt(submit.message_id, self.receipt_state, submit)
            self.receipts[submit.message_id] = receipt
            self._later(self.receipt_delay, writer, sequences, receipt)

    def _later(self, delay: float, writer, sequences, receipt: Receipt) -> None:
        timers = self._timers
        timer = self._loop.call_later(
            delay, lambda: (timers.discard(timer), self._send_receipt(writer, sequences, receipt))
        )
        timers.add(timer)

    def _send_receipt(self, writer, sequences, receipt: Receipt):
        submit = receipt.submit
        if writer.is_closing():
            return
        ok = receipt.state == "DELIVRD"
        text = (
            f"id:{receipt.message_id} sub:001 dlvrd:{'001' if ok else '000'}"
            f" submit date:2611301400 done date:2611301401 stat:{receipt.state}"
            f" err:{'000' if ok else '001'} text:"
        ).encode("ascii")
        body = b"".join(
            [
                _cstr(""),  # service_type
                bytes([1, 1]),
                _cstr(submit.destination_addr),
                bytes([5, 0]),
                _cstr(submit.source_addr),
                bytes([0x04, 0, 0]),  # esm_class: SMSC delivery receipt; protocol, priority
                _cstr(""),
                _cstr(""),  # schedule, validity
                bytes([0, 0, 0, 0]),  # registered_delivery, replace, data_coding, default id
                bytes([len(text)]),
                text,
            ]
        )
        if self.receipt_tlvs:
            message_id = _cstr(receipt.message_id)
            body += struct.pack(">HH", TLV_RECEIPTED_MESSAGE_ID, len(message_id)) + message_id
            body += struct.pack(">HHB", TLV_MESSAGE_STATE, 1, MESSAGE_STATE[receipt.state])
        receipt.sequence = next(sequences)
        self._awaiting[(id(writer), receipt.sequence)] = receipt
        receipt.sent_at.append(time.monotonic())
        writer.write(_pdu(DELIVER_SM, 0, receipt.sequence, body))
