"""Postmark (POST /email): its HTTP statuses and numeric ErrorCodes.

- a refused recipient (ErrorCode 406 inactive: it bounced hard or complained before; an
  invalid `To`) is raised by anymail as refused recipients: a hard bounce;
- ErrorCode 10 (bad token), 400/401 (sender signature), 405/412/413 (not allowed to send)
  are our account's problems: transient;
- any other 422 (ErrorCode 300 invalid request, 402, 409, 411, …) refuses the message.
"""

from __future__ import annotations

import requests
from anymail.backends.postmark import EmailBackend as PostmarkBackend

from deliveries.channels import esp

# Postmark ErrorCodes about our account or sender, not the message: retried.
ACCOUNT_CODES = frozenset({10, 400, 401, 405, 412, 413})


class Backend(esp.BoundedSessionMixin, PostmarkBackend):
    """anymail's Postmark backend on our bounded session."""


def read(response: requests.Response) -> esp.Refusal:
    """The provider's error answer, read (see the module doc)."""
    body = esp.json_body(response)
    if body is None:
        return esp.Refusal(None, response.text[: esp.RESPONSE_CHARS])
    code = body.get("ErrorCode")
    code = code if isinstance(code, int) else None
    return esp.Refusal(
        code,
        str(body.get("Message", "")),
        account=code in ACCOUNT_CODES,
    )
