"""Amazon SES (API v2 SendEmail, through boto3): errors are AWS error codes.

boto3's own HTTP stack is not used for the call: a `before-send` hook sends the signed
request through our bounded session (a total deadline, a bounded read, no redirects, no
proxy from the environment) and hands botocore the answer, which it parses as its own.
The client makes one attempt per call (our retry policy retries) and its endpoint is
AMAZON_SES_ENDPOINT_URL when set (a test peer), else the region's.

- SES refuses no recipient address when it takes a message: one on the account's
  suppression list, or one that does not exist, comes back as a Bounce event;
- TooManyRequestsException (429), ThrottlingException, LimitExceededException (sending
  quota), AccountSuspendedException, SendingPausedException, an unverified identity or
  MAIL FROM domain, a missing configuration set, bad or expired credentials: our
  account's, transient;
- MessageRejected (other than an unverified identity), BadRequestException: the message
  is refused, permanent.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import requests
from anymail.backends.amazon_ses import EmailBackend as AmazonSESBackend
from anymail.exceptions import AnymailError
from botocore.awsrequest import AWSPreparedRequest, AWSResponse
from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    ConnectTimeoutError,
    EndpointConnectionError,
    ReadTimeoutError,
)
from django.conf import settings

from deliveries.channels.base import SendResult
from deliveries.channels.esp import RESPONSE_CHARS, Refusal, judged
from egress.sessions import bounded_session

ACCOUNT_CODES = frozenset(
    {
        "TooManyRequestsException",
        "ThrottlingException",
        "LimitExceededException",
        "AccountSuspendedException",
        "SendingPausedException",
        "MailFromDomainNotVerifiedException",
        "NotFoundException",
        "AccessDeniedException",
        "UnrecognizedClientException",
        "InvalidClientTokenId",
        "ExpiredTokenException",
        "SignatureDoesNotMatch",
    }
)


class Backend(AmazonSESBackend):
    """anymail's Amazon SES backend whose calls go out through our bounded session."""

    def open(self) -> bool:
        created = super().open()
        if created and self.client is not None:
            self.client.meta.events.register("before-send.sesv2", _send_bounded)
        return bool(created)


class _Body:
    """The answer's body, already read (and bounded), as botocore reads a raw stream."""

    def __init__(self, content: bytes) -> None:
        self._content = content

    def stream(self, **_: Any) -> Iterator[bytes]:
        yield self._content


def _send_bounded(request: AWSPreparedRequest, **_: Any) -> AWSResponse:
    session = bounded_session(
        settings.NOTIFY_ESP_CALL_DEADLINE, settings.NOTIFY_ESP_MAX_RESPONSE_BYTES
    )
    try:
        answer = session.request(
            request.method, request.url, headers=dict(request.headers.items()), data=request.body
        )
    except requests.Timeout as error:
        raise ReadTimeoutError(endpoint_url=request.url, error=error) from error
    except requests.RequestException as error:
        raise EndpointConnectionError(endpoint_url=request.url, error=error) from error
    return AWSResponse(request.url, answer.status_code, answer.headers, _Body(answer.content))


def classify(error: AnymailError) -> SendResult:
    """Map a failed SendEmail to a transient or permanent result (see the module doc)."""
    cause = error.__cause__
    if isinstance(cause, ClientError):
        details = cause.response.get("Error") or {}
        code = str(details.get("Code") or "")
        text = str(details.get("Message") or "")
        status = cause.response.get("ResponseMetadata", {}).get("HTTPStatusCode") or 400
        unverified = code == "MessageRejected" and "not verified" in text
        return judged(int(status), Refusal(code, text, account=code in ACCOUNT_CODES or unverified))
    if isinstance(cause, BotoCoreError):  # no answer: network, deadline
        timed_out = isinstance(cause, ReadTimeoutError | ConnectTimeoutError)
        return SendResult.transient(
            status_code="timeout" if timed_out else type(cause).__name__,
            response=str(cause)[:RESPONSE_CHARS],
        )
    return SendResult.permanent(
        status_code=type(error).__name__, response=str(error)[:RESPONSE_CHARS]
    )
