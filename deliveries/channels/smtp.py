"""Email's SMTP session: one kept open per sender thread, its sockets under the current
call's deadline (egress/deadline.py), and a message of the usual shape
written directly instead of built by Django (`VersionEmailMessage.wire_bytes`).

Keeping the session spares each message the TCP, TLS and EHLO round trips. It is
dropped on any failure, and after NOTIFY_SMTP_KEEP_IDLE_SECONDS unused; the next send
opens a fresh one.
"""

from __future__ import annotations

import contextlib
import functools
import re
import smtplib
import socket
import threading
import time
from collections.abc import Sequence
from typing import Any

from django.conf import settings
from django.core.mail import get_connection
from django.core.mail.backends.base import BaseEmailBackend
from django.core.mail.backends.smtp import EmailBackend
from django.core.mail.message import EmailMessage, sanitize_address

from egress.deadline import deadline_watch


class _QuotedEnvelope(smtplib.SMTP):
    """smtplib's MAIL FROM and RCPT TO, with the addresses quoted by `envelope_quoted`
    (smtplib's `quoteaddr` parses each address, twice per email), and PIPELINING (RFC
    2920) where the relay offers it: MAIL, RCPT and DATA go in one write and their three
    answers are read together, so an email costs two round trips to the relay, not four.
    The commands and the errors raised are otherwise smtplib's; a MAIL with SMTPUTF8 is
    left to smtplib as it is."""

    def mail(self, sender: str, options: Sequence[str] = ()) -> tuple[int, bytes]:
        if any(option.lower() == "smtputf8" for option in options):
            return super().mail(sender, options)
        self.putcmd("mail", self._mail_args(sender, options))
        return self.getreply()

    def rcpt(self, recip: str, options: Sequence[str] = ()) -> tuple[int, bytes]:
        self.putcmd("rcpt", self._rcpt_args(recip, options))
        return self.getreply()

    def _mail_args(self, sender: str, options: Sequence[str]) -> str:
        return f"FROM:{_sender_quoted(sender)}{self._options(options)}"

    def _rcpt_args(self, recipient: str, options: Sequence[str]) -> str:
        return f"TO:{envelope_quoted(recipient)}{self._options(options)}"

    def _options(self, options: Sequence[str]) -> str:
        return " " + " ".join(options) if options and self.does_esmtp else ""

    def sendmail(  # type: ignore[override]
        self,
        from_addr: str,
        to_addrs: str | Sequence[str],
        msg: bytes | str,
        mail_options: Sequence[str] = (),
        rcpt_options: Sequence[str] = (),
    ) -> dict[str, tuple[int, bytes]]:
        self.ehlo_or_helo_if_needed()
        recipients = [to_addrs] if isinstance(to_addrs, str) else list(to_addrs)
        pipelined = (
            self.does_esmtp
            and self.has_extn("pipelining")
            and isinstance(msg, bytes)
            and len(recipients) == 1
            and not rcpt_options
            and not any(option.lower() == "smtputf8" for option in mail_options)
        )
        if not pipelined:
            return super().sendmail(from_addr, to_addrs, msg, mail_options, rcpt_options)
        return self._sendmail_pipelined(from_addr, recipients[0], msg, mail_options)

    def _sendmail_pipelined(
        self, sender: str, recipient: str, msg: bytes, mail_options: Sequence[str]
    ) -> dict[str, tuple[int, bytes]]:
        """smtplib's `sendmail` for one recipient, its three commands in one write."""
        options = list(mail_options)
        if self.has_extn("size"):
            options.insert(0, f"size={len(msg)}")
        commands = (
            f"mail {self._mail_args(sender, options)}\r\n"
            f"rcpt {self._rcpt_args(recipient, ())}\r\ndata\r\n"
        )  # smtplib's own spelling of the three commands
        if commands.count("\r") != 3 or commands.count("\n") != 3:
            raise ValueError(f"command arguments contain newline characters: {commands!r}")
        self.send(commands)
        mail_code, mail_answer = self.getreply()
        if mail_code == 421:  # the relay is closing: no more answers will come
            self.close()
            raise smtplib.SMTPSenderRefused(mail_code, mail_answer, sender)
        rcpt_code, rcpt_answer = self.getreply()
        if rcpt_code == 421:
            self.close()
            raise smtplib.SMTPRecipientsRefused({recipient: (rcpt_code, rcpt_answer)})
        data_code, data_answer = self.getreply()
        if mail_code != 250:
            self._transaction_reset(data_code)
            raise smtplib.SMTPSenderRefused(mail_code, mail_answer, sender)
        if rcpt_code not in (250, 251):
            self._transaction_reset(data_code)
            raise smtplib.SMTPRecipientsRefused({recipient: (rcpt_code, rcpt_answer)})
        if data_code != 354:
            raise self._data_refused(data_code, data_answer)
        body = _PERIOD_AT_LINE_START.sub(b"..", msg)
        if not body.endswith(b"\r\n"):
            body += b"\r\n"
        self.send(body + b".\r\n")
        code, answer = self.getreply()
        if code != 250:
            raise self._data_refused(code, answer)
        return {}

    def _data_refused(self, code: int, answer: bytes) -> smtplib.SMTPDataError:
        """DATA or the message refused: as smtplib, close on 421, else reset; the error."""
        if code == 421:
            self.close()
        else:
            self._rset()
        return smtplib.SMTPDataError(code, answer)

    def _transaction_reset(self, data_code: int) -> None:
        """Reset a transaction whose envelope was refused. A relay that took DATA (354)
        all the same first gets an empty message, which it refuses for want of a
        recipient (RFC 2920, 3.1)."""
        if data_code == 354:
            self.send(b".\r\n")
            self.getreply()
        self._rset()


class _WatchedSmtp(_QuotedEnvelope):
    def _get_socket(self, host: str, port: int, timeout: float) -> socket.socket:
        sock = super()._get_socket(host, port, timeout)
        deadline_watch(sock)  # from the connect on: the greeting can drip too
        return sock

    def starttls(self, *args: Any, **kwargs: Any) -> tuple[int, bytes]:
        reply = super().starttls(*args, **kwargs)
        deadline_watch(self.sock)  # the TLS socket took the plain one's place
        return reply


class _WatchedSmtpSsl(_QuotedEnvelope, smtplib.SMTP_SSL):
    def _get_socket(self, host: str, port: int, timeout: float) -> socket.socket:
        sock = super()._get_socket(host, port, timeout)
        deadline_watch(sock)
        return sock


class DeadlineSmtpBackend(EmailBackend):
    """Django's SMTP backend with its sockets under the current call's deadline.

    Only how the bytes are made differs from Django's `_send`: a message that writes
    its own (`wire_bytes`, for one recipient) is sent as written, with the sender's
    sanitized form cached; anything else goes through Django's `_send` as it is.
    """

    @property
    def connection_class(self) -> type[smtplib.SMTP]:
        return _WatchedSmtpSsl if self.use_ssl else _WatchedSmtp

    def _send(self, email_message: EmailMessage) -> bool:
        written = None if self.fail_silently else _written(email_message)
        envelope = getattr(email_message, "envelope_sender", "")
        if written is None:
            if envelope:  # Django's `_send` takes the envelope sender from `from_email`
                email_message.extra_headers.setdefault("From", email_message.from_email)
                email_message.from_email = envelope
            return super()._send(email_message)
        sender, recipient, data = written
        self.connection.sendmail(envelope or sender, [recipient], data)
        return True


def _written(message: EmailMessage) -> tuple[str, str, bytes] | None:
    """(envelope sender, recipient, bytes) of a message that writes itself, else None."""
    wire = getattr(message, "wire_bytes", None)
    recipients = message.recipients()
    if wire is None or len(recipients) != 1:
        return None
    encoding = message.encoding or settings.DEFAULT_CHARSET
    sender = _sanitized(message.from_email, encoding)  # the same for every email
    recipient = address_sanitized(recipients[0], encoding)
    data = wire(from_header=sender, to_header=recipient)
    return None if data is None else (sender, recipient, data)


_PERIOD_AT_LINE_START = re.compile(rb"(?m)^\.")  # smtplib's dot-stuffing, as in `data`


@functools.lru_cache(maxsize=64)
def _sanitized(address: str, encoding: str) -> str:
    """Django's sanitized form of an address: parsing it is most of a header's cost."""
    return sanitize_address(address, encoding)


# A bare ASCII address whose local part is a dot-atom and whose domain is plain labels
# (1 to 63 letters, digits or hyphens): Django's sanitized form of it is itself.
_atext = r"[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+"
_label = r"[A-Za-z0-9-]{1,63}"
_PLAIN_ADDRESS = re.compile(rf"{_atext}(?:\.{_atext})*@{_label}(?:\.{_label})*")


def address_sanitized(address: str, encoding: str) -> str:
    """Django's `sanitize_address` of one recipient, without parsing the address when
    it is a plain one (nearly every recipient): parsing is a tenth of a campaign
    sender's CPU, and each recipient is a new address, so a cache would not help."""
    if len(address) <= 254 and _PLAIN_ADDRESS.fullmatch(address):
        return address
    return sanitize_address(address, encoding)


def envelope_quoted(address: str) -> str:
    """smtplib's `quoteaddr` of an envelope address, without parsing a plain one (the
    parser answers a plain address with itself in angle brackets)."""
    if len(address) <= 254 and _PLAIN_ADDRESS.fullmatch(address):
        return f"<{address}>"
    return smtplib.quoteaddr(address)


@functools.lru_cache(maxsize=64)
def _sender_quoted(address: str) -> str:
    """`envelope_quoted` of the sender, the same for every email (often with a name)."""
    return envelope_quoted(address)


class _KeptConnection(threading.local):
    backend: BaseEmailBackend | None = None
    last_used: float = 0.0


_kept = _KeptConnection()


def send_on_kept_connection(message: EmailMessage, *, to: str) -> None:
    """Send on this thread's open session (opened when missing or idle too long).

    A session that was idle may have been closed by the relay in the meantime; when the
    relay says so before taking the message (disconnected at MAIL FROM), the message is
    sent once more on a fresh session.
    """
    reused = _kept.backend is not None and (
        time.monotonic() - _kept.last_used < settings.NOTIFY_SMTP_KEEP_IDLE_SECONDS
    )
    if not reused:
        kept_session_close()
        _kept.backend = _open_backend()
    else:  # opened during an earlier call: its socket joins this call's deadline
        # Only Django's SMTP backend has a connection (locmem, console and file have none).
        deadline_watch(getattr(getattr(_kept.backend, "connection", None), "sock", None))
    message.connection = _kept.backend
    try:
        message.send(to=[to])
    except smtplib.SMTPServerDisconnected:
        kept_session_close()
        if not reused:
            raise
        _kept.backend = _open_backend()
        message.connection = _kept.backend
        try:
            message.send(to=[to])
        except Exception:
            kept_session_close()
            raise
    except Exception:
        kept_session_close()
        raise
    _kept.last_used = time.monotonic()


def _open_backend() -> BaseEmailBackend:
    """An open session: Django's SMTP backend as its deadline-aware subclass, any other
    configured backend (locmem in tests) as it is."""
    if settings.EMAIL_BACKEND == "django.core.mail.backends.smtp.EmailBackend":
        backend: BaseEmailBackend = DeadlineSmtpBackend(fail_silently=False)
    else:
        backend = get_connection(fail_silently=False)
    backend.open()
    return backend


def kept_session_close() -> None:
    """Close this thread's kept SMTP session, if any: the next send opens a fresh one."""
    if _kept.backend is not None:
        with contextlib.suppress(Exception):  # already broken: nothing to close cleanly
            _kept.backend.close()
        _kept.backend = None
