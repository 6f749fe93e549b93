"""Email through an email service provider's API (NOTIFY_EMAIL_ESP), with django-anymail's
backend for it: the message built by email.py, sent on a session kept per sender thread.

One module per provider (postmark, amazon_ses, sendgrid, mailgun, brevo), each with its
`Backend` (anymail's, on a bounded session: a total deadline per call, a bounded read of
the answer, no redirects, no proxy from the environment) and its `read` of the
provider's error answers (Amazon SES: its `classify`), into the shared verdicts of
`judged`:
- the recipient address itself refused (inactive after a bounce or complaint, invalid):
  permanent and a hard bounce, so the address is suppressed;
- 429: transient, after the provider's Retry-After (or its own reset header);
- 5xx, timeouts, connection errors: transient (the provider, not the message);
- our account's problems (credentials, sender identity, credits, sending paused):
  transient; nothing is wrong with the message, and the breaker stops the calls while
  someone fixes the account;
- any other refusal of the message itself: permanent.
Transient answers count against the provider's breaker; every call takes a token of its
rate limit (deliveries/pipeline/pressure.py), as SMTP's do. This package (and anymail
with it) is imported only when an ESP is configured (email.py loads it by name).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from dataclasses import dataclass, replace
from importlib import import_module
from types import ModuleType
from typing import Any

import requests
from anymail.exceptions import AnymailError, AnymailRecipientsRefused, AnymailRequestsAPIError
from django.conf import settings
from django.core.mail import EmailMessage

from deliveries.channels.base import SendResult, call_failed, parse_retry_after
from egress.sessions import bounded_mount

# Longest provider text kept with an attempt.
RESPONSE_CHARS = 500


def provider_module(esp: str) -> ModuleType:
    """The module of one provider (its `Backend`; its `read`, or `classify`), imported on
    first use."""
    return import_module(f"{__name__}.{esp}")


class BoundedSessionMixin:
    """Put anymail's requests session under our bounds: a total deadline per call, a
    bounded read of the answer, no redirects and no proxy from the environment."""

    def create_session(self) -> requests.Session:
        session = super().create_session()  # type: ignore[misc]
        session.trust_env = False
        session.max_redirects = 0
        bounded_mount(
            session,
            total_seconds=settings.NOTIFY_ESP_CALL_DEADLINE,
            max_bytes=settings.NOTIFY_ESP_MAX_RESPONSE_BYTES,
        )
        return session


@dataclass(frozen=True)
class Refusal:
    """A provider's error answer as its module reads it."""

    code: str | int | None
    text: str
    address: bool = False  # the recipient address itself was refused: a hard bounce
    account: bool = False  # about our account, sender or configuration: transient
    retry_after: float | None = None  # the provider's own wait header (Retry-After wins)


def judged(status: int, refusal: Refusal) -> SendResult:
    """The verdict on one error answer (see the module doc)."""
    label = f"{status}/{refusal.code}" if refusal.code not in (None, "") else str(status)
    text = refusal.text[:RESPONSE_CHARS]
    if refusal.address:
        return SendResult.permanent(status_code=label, response=text, hard_bounce=True)
    if status == 429:
        return SendResult.transient(
            status_code=label, response=text, retry_after=refusal.retry_after
        )
    if status >= 500 or status in (401, 403) or refusal.account:
        return SendResult.transient(status_code=label, response=text)
    return SendResult.permanent(status_code=label, response=text)


def classify_http(error: AnymailError, read: Callable[[requests.Response], Refusal]) -> SendResult:
    """Classify a failed call of a provider spoken over `requests`; `read` turns its
    error answer into a `Refusal`."""
    if isinstance(error, AnymailRecipientsRefused):
        # The provider refused the address itself (inactive after a bounce or complaint,
        # or invalid): a hard bounce.
        return SendResult.permanent(
            status_code="refused", response=str(error)[:RESPONSE_CHARS], hard_bounce=True
        )
    if not isinstance(error, AnymailRequestsAPIError) or error.response is None:
        if isinstance(error, requests.RequestException):  # no answer: network, deadline
            return call_failed(error)
        return SendResult.permanent(
            status_code=type(error).__name__, response=str(error)[:RESPONSE_CHARS]
        )
    refusal = read(error.response)
    wait = retry_after(error.response)  # the standard header wins over a provider's own
    if wait is not None:
        refusal = replace(refusal, retry_after=wait)
    return judged(error.response.status_code, refusal)


def classify(provider: ModuleType, error: AnymailError) -> SendResult:
    """One provider's verdict on a failed call: its own `classify` (Amazon SES, spoken
    through boto3), else its `read` of the HTTP error answer."""
    if hasattr(provider, "classify"):
        return provider.classify(error)
    return classify_http(error, provider.read)


def json_body(response: requests.Response) -> dict | None:
    """The answer's JSON object, or None when it is not one."""
    try:
        body = response.json()
    except ValueError:
        return None
    return body if isinstance(body, dict) else None


def retry_after(response: requests.Response) -> float | None:
    """The answer's Retry-After, in seconds."""
    return parse_retry_after(response.headers.get("Retry-After"))


class _Kept(threading.local):
    def __init__(self) -> None:
        self.backends: dict[str, Any] = {}  # one per provider (failover may use two)


_kept = _Kept()


def send(message: EmailMessage, *, to: str, esp: str | None = None) -> SendResult:
    """Send a built message to `to` through the configured ESP (or `esp`); the provider's
    message id is returned with a delivered result."""
    esp = esp or settings.NOTIFY_EMAIL_ESP
    provider = provider_module(esp)
    backend = _kept.backends.get(esp)
    if backend is None:
        backend = provider.Backend(fail_silently=False)
        backend.open()
        _kept.backends[esp] = backend
    message.connection = backend
    try:
        message.send(to=[to])
    except AnymailError as error:
        if not isinstance(error, AnymailRecipientsRefused):
            kept_session_close(esp)  # a fresh session next time: this one may be broken
        return classify(provider, error)
    status = message.anymail_status  # type: ignore[attr-defined]
    recipient = status.recipients.get(to)
    message_id = (recipient.message_id if recipient else None) or status.message_id or ""
    return SendResult.delivered(provider_message_id=str(message_id)[:255], status_code="200")


def kept_session_close(esp: str | None = None) -> None:
    """Close this thread's kept ESP session (`esp`'s, or every one): the next send opens
    a fresh one."""
    for name in [esp] if esp else list(_kept.backends):
        backend = _kept.backends.pop(name, None)
        if backend is not None:
            with contextlib.suppress(Exception):
                backend.close()
