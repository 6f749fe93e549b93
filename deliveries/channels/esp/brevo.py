"""Brevo (POST /v3/smtp/email, `{"messageId": "<...>"}`): errors are
`{"code": "...", "message": "..."}`.

- a 400 `invalid_parameter` about a recipient's email refuses the address: a hard bounce
  (blocklisted contacts are accepted and reported later as `blocked`);
- `unauthorized` (401), `not_enough_credits`/`payment_required` (402),
  `permission_denied` (403: unrecognised IP, account not activated),
  `account_under_validation` are our account's: transient;
- 429 carries x-sib-ratelimit-reset (seconds) rather than Retry-After;
- any other 4xx (missing/invalid parameter, duplicate) refuses the message.
"""

from __future__ import annotations

import re

import requests
from anymail.backends.brevo import EmailBackend as BrevoBackend

from deliveries.channels import esp
from deliveries.channels.base import parse_retry_after

ACCOUNT_CODES = frozenset(
    {
        "unauthorized",
        "not_enough_credits",
        "payment_required",
        "permission_denied",
        "account_under_validation",
    }
)
_BAD_RECIPIENT = re.compile(r"\bemail\b.*\b(not valid|invalid)\b.*\b(to|cc|bcc)\b", re.IGNORECASE)


class Backend(esp.BoundedSessionMixin, BrevoBackend):
    """anymail's Brevo backend on our bounded session."""


def read(response: requests.Response) -> esp.Refusal:
    """The provider's error answer, read (see the module doc)."""
    body = esp.json_body(response)
    if body is None:
        return esp.Refusal(None, response.text[: esp.RESPONSE_CHARS], retry_after=_wait(response))
    code = str(body.get("code") or "")
    text = str(body.get("message", ""))
    return esp.Refusal(
        code or None,
        text,
        address=code == "invalid_parameter" and bool(_BAD_RECIPIENT.search(text)),
        account=code in ACCOUNT_CODES,
        retry_after=_wait(response),
    )


def _wait(response: requests.Response) -> float | None:
    """x-sib-ratelimit-reset: seconds until the rate limit's window resets."""
    return parse_retry_after(response.headers.get("x-sib-ratelimit-reset"))
