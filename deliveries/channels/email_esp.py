"""Email through an email service provider's API (NOTIFY_EMAIL_ESP), with django-anymail's
backend for it: the message built by email.py, sent on a session kept per sender thread.

Classification of the provider's answers (Postmark's HTTP statuses and ErrorCodes):
- a refused recipient (ErrorCode 406 inactive: it bounced hard or complained before; an
  invalid `To`) is permanent and a hard bounce: the address is suppressed;
- 429 (rate limited) is transient, with the provider's Retry-After;
- 5xx, timeouts and connection errors are transient (the provider, not the message);
- our account's problems (401 bad token, ErrorCode 10, 400/401 sender signature, 405/412/413
  not allowed to send) are transient: nothing is wrong with the message, and the breaker
  stops the calls while someone fixes the account;
- any other refusal of the message itself (422 with ErrorCode 300, 402, 409, 411, …) is
  permanent.
Transient answers count against the provider's breaker; every call takes a token of its
rate limit (deliveries/pipeline/pressure.py), as SMTP's do.
"""

from __future__ import annotations

import contextlib
import threading
from typing import Any

import requests
from anymail.backends.postmark import EmailBackend as PostmarkBackend
from anymail.exceptions import AnymailError, AnymailRecipientsRefused, AnymailRequestsAPIError
from django.conf import settings
from django.core.mail import EmailMessage

from deliveries.channels.base import SendResult, bounded_mount, call_failed, parse_retry_after

# Postmark ErrorCodes about our account or sender, not the message: retried.
POSTMARK_ACCOUNT_CODES = frozenset({10, 400, 401, 405, 412, 413})


class BoundedPostmarkBackend(PostmarkBackend):
    """anymail's Postmark backend on a session with a total deadline per call, a bounded
    read of the answer, no redirects and no proxy from the environment."""

    def create_session(self) -> requests.Session:
        session = super().create_session()
        session.trust_env = False
        session.max_redirects = 0
        bounded_mount(
            session,
            total_seconds=settings.NOTIFY_ESP_CALL_DEADLINE,
            max_bytes=settings.NOTIFY_ESP_MAX_RESPONSE_BYTES,
        )
        return session


BACKENDS = {"postmark": BoundedPostmarkBackend}


class _Kept(threading.local):
    backend: Any = None


_kept = _Kept()


def send(message: EmailMessage, *, to: str) -> SendResult:
    """Send a built message to `to` through the configured ESP; the provider's message id
    is returned with a delivered result."""
    if _kept.backend is None:
        _kept.backend = BACKENDS[settings.NOTIFY_EMAIL_ESP](fail_silently=False)
        _kept.backend.open()
    message.connection = _kept.backend
    try:
        message.send(to=[to])
    except AnymailError as error:
        if not isinstance(error, AnymailRecipientsRefused):
            kept_session_close()  # a fresh session next time: this one may be broken
        return classify_esp_error(error)
    status = message.anymail_status  # type: ignore[attr-defined]
    recipient = status.recipients.get(to)
    message_id = (recipient.message_id if recipient else None) or status.message_id or ""
    return SendResult.delivered(provider_message_id=str(message_id)[:255], status_code="200")


def classify_esp_error(error: AnymailError) -> SendResult:
    """Map an anymail failure to a transient or permanent result (see the module doc)."""
    if isinstance(error, AnymailRecipientsRefused):
        # The provider refused the address itself (inactive after a bounce or complaint,
        # or invalid): a hard bounce.
        return SendResult.permanent(
            status_code="refused", response=str(error)[:500], hard_bounce=True
        )
    if not isinstance(error, AnymailRequestsAPIError) or error.response is None:
        if isinstance(error, requests.RequestException):  # no answer: network, deadline
            return call_failed(error)
        return SendResult.permanent(status_code=type(error).__name__, response=str(error)[:500])
    response = error.response
    code, text = _error_body(response)
    status = response.status_code
    label = f"{status}/{code}" if code is not None else str(status)
    if status == 429:
        retry_after = parse_retry_after(response.headers.get("Retry-After"))
        return SendResult.transient(status_code=label, response=text, retry_after=retry_after)
    if status >= 500 or status in (401, 403) or code in POSTMARK_ACCOUNT_CODES:
        return SendResult.transient(status_code=label, response=text)
    return SendResult.permanent(status_code=label, response=text)


def _error_body(response: requests.Response) -> tuple[int | None, str]:
    """(ErrorCode, Message) of a Postmark error answer; (None, the text) when not JSON."""
    try:
        body = response.json()
    except ValueError:
        return None, response.text[:500]
    if not isinstance(body, dict):
        return None, response.text[:500]
    code = body.get("ErrorCode")
    return (code if isinstance(code, int) else None), str(body.get("Message", ""))[:500]


def kept_session_close() -> None:
    """Close this thread's kept ESP session, if any: the next send opens a fresh one."""
    if _kept.backend is not None:
        with contextlib.suppress(Exception):
            _kept.backend.close()
        _kept.backend = None
