"""SendGrid (v3 POST /mail/send, 202 when accepted): errors are
`{"errors": [{"message", "field", "help"}]}`.

- a 400 whose error names a recipient's email field (`personalizations.0.to.0.email`:
  "Does not contain a valid address.") refuses the address: a hard bounce (addresses on
  SendGrid's own suppression lists are accepted and reported later as `dropped`);
- 401 (bad API key) and 403 (sender identity not verified, key without Mail Send access)
  are our account's: transient;
- 429 carries X-RateLimit-Reset (a Unix time) rather than Retry-After;
- any other 4xx (400 invalid request, 413 too large) refuses the message.
SendGrid answers no message id worth keeping: anymail gives each message its own
(`anymail_id`, in the message's custom args), which SendGrid's events carry back.
"""

from __future__ import annotations

import re
import time

import requests
from anymail.backends.sendgrid import EmailBackend as SendGridBackend

from deliveries.channels import esp
from deliveries.channels.base import parse_retry_after

_RECIPIENT_FIELD = re.compile(r"personalizations\.\d+\.(to|cc|bcc)(\.\d+\.email)?")


class Backend(esp.BoundedSessionMixin, SendGridBackend):
    """anymail's SendGrid backend on our bounded session."""


def read(response: requests.Response) -> esp.Refusal:
    """The provider's error answer, read (see the module doc)."""
    body = esp.json_body(response) or {}
    errors = [e for e in body.get("errors") or [] if isinstance(e, dict)]
    if not errors:
        return esp.Refusal(None, response.text[: esp.RESPONSE_CHARS], retry_after=_wait(response))
    fields = [str(e.get("field") or "") for e in errors]
    text = "; ".join(f"{f}: {e.get('message', '')}" if f else str(e.get("message", ""))
                     for f, e in zip(fields, errors, strict=True))  # fmt: skip
    address = response.status_code == 400 and any(_RECIPIENT_FIELD.fullmatch(f) for f in fields)
    return esp.Refusal(None, text, address=address, retry_after=_wait(response))


def _wait(response: requests.Response) -> float | None:
    """The seconds until X-RateLimit-Reset (a Unix time)."""
    reset = response.headers.get("X-RateLimit-Reset", "")
    if not reset.isdigit():
        return None
    return parse_retry_after(str(max(0, int(reset) - int(time.time()))))
