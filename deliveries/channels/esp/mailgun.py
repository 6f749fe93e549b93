"""Mailgun (POST /v3/<domain>/messages, multipart form): errors are `{"message": "..."}`
(a plain "Forbidden" for a bad key).

- a 400 saying a recipient ('to') is not a valid address refuses the address: a hard
  bounce (addresses on Mailgun's suppression lists are accepted and reported later as
  failed, reason suppress-bounce);
- 401 (bad key), 402 (payment required), 403 (sandbox domain to an unauthorised
  recipient, domain disabled) and 404 (unknown sending domain) are our account's:
  transient;
- any other 4xx (400 invalid request, 413 too large) refuses the message.
"""

from __future__ import annotations

import re

import requests
from anymail.backends.mailgun import EmailBackend as MailgunBackend

from deliveries.channels import esp

_ACCOUNT_STATUSES = frozenset({401, 402, 403, 404})
_BAD_RECIPIENT = re.compile(r"'?(to|cc|bcc)'? parameter is not a valid address", re.IGNORECASE)


class Backend(esp.BoundedSessionMixin, MailgunBackend):
    """anymail's Mailgun backend on our bounded session."""


def read(response: requests.Response) -> esp.Refusal:
    """The provider's error answer, read (see the module doc)."""
    body = esp.json_body(response)
    text = str(body.get("message", "")) if body else response.text[: esp.RESPONSE_CHARS]
    status = response.status_code
    return esp.Refusal(
        None,
        text,
        address=status == 400 and bool(_BAD_RECIPIENT.search(text)),
        account=status in _ACCOUNT_STATUSES,
    )
