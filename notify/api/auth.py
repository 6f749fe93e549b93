"""Producer authentication (`Authorization: Bearer <api key>`) and per-key rate limits."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from django.conf import settings
from redis.exceptions import RedisError
from rest_framework import authentication, exceptions, throttling

from notify.models import ApiKey, Producer, Recipient
from notify.ratelimit import bucket_take
from notify.services import api_key_authenticate
from notify.tokens import USER_TOKEN_PREFIX, user_token_recipient_id

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class ProducerPrincipal:
    """`request.user` for a request made with a producer's API key."""

    producer: Producer
    api_key: ApiKey
    is_authenticated: bool = True


class ApiKeyAuthentication(authentication.BaseAuthentication):
    keyword = "bearer"

    def authenticate(self, request):
        header = authentication.get_authorization_header(request).split()
        if not header:
            return None
        if header[0].lower() != self.keyword.encode() or len(header) != 2:
            raise exceptions.AuthenticationFailed("Use 'Authorization: Bearer <api key>'.")
        try:
            key = header[1].decode()
        except UnicodeDecodeError:
            raise exceptions.AuthenticationFailed("Malformed API key.") from None
        api_key = api_key_authenticate(key=key)
        if api_key is None:
            raise exceptions.AuthenticationFailed("Unknown or revoked API key.")
        return ProducerPrincipal(producer=api_key.producer, api_key=api_key), api_key

    def authenticate_header(self, request) -> str:
        return 'Bearer realm="notify"'


@dataclass(frozen=True)
class UserPrincipal:
    """`request.user` for a request made with an end user's token."""

    recipient: Recipient
    is_authenticated: bool = True


# What an end-user token may reach, and only for its own user_id.
# A browser or app registers and removes its own push subscription with its user token.
USER_TOKEN_VIEWS = frozenset(
    {"feed-list", "feed-read", "unread-count", "preferences", "device-register", "device-delete"}
)


class UserTokenAuthentication(authentication.BaseAuthentication):
    """`Authorization: Bearer ut_…`: a short-lived token for one recipient's own data.

    Any other bearer value is left to ApiKeyAuthentication. A valid token used on
    another user's data, or on a producer endpoint, is refused with 403 here, so no
    view can forget the check.
    """

    def authenticate(self, request):
        header = authentication.get_authorization_header(request).split()
        if len(header) != 2 or header[0].lower() != b"bearer":
            return None
        token = header[1].decode("utf-8", "replace")
        if not token.startswith(USER_TOKEN_PREFIX):
            return None
        recipient_id = user_token_recipient_id(token)
        recipient = Recipient.objects.filter(pk=recipient_id).first() if recipient_id else None
        if recipient is None:
            raise exceptions.AuthenticationFailed("Invalid or expired user token.")
        match = getattr(request._request, "resolver_match", None)
        own = match is not None and match.kwargs.get("user_id") == recipient.user_id
        if not own or match.url_name not in USER_TOKEN_VIEWS:
            raise exceptions.PermissionDenied("This user token may not access this resource.")
        return UserPrincipal(recipient=recipient), token

    def authenticate_header(self, request) -> str:
        return 'Bearer realm="notify"'


class ApiKeyRateThrottle(throttling.BaseThrottle):
    """Token bucket per API key. Fails open: Redis down must not stop intake."""

    def __init__(self) -> None:
        self._wait: float | None = None

    def allow_request(self, request, view) -> bool:
        api_key = getattr(request.user, "api_key", None)
        if api_key is None:
            return True
        rate = api_key.rate_per_second or settings.NOTIFY_API_RATE_PER_SECOND
        burst = api_key.rate_burst or settings.NOTIFY_API_RATE_BURST
        try:
            take = bucket_take(key=f"notify:ratelimit:key:{api_key.pk}", rate=rate, burst=burst)
        except RedisError:
            logger.warning("API rate limit skipped: Redis unavailable")
            return True
        self._wait = take.wait_seconds
        return take.allowed

    def wait(self) -> float | None:
        return self._wait
