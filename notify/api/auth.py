"""Producer authentication (`Authorization: Bearer <api key>`) and per-key rate limits."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from django.conf import settings
from redis.exceptions import RedisError
from rest_framework import authentication, exceptions, throttling

from notify.models import ApiKey, Producer
from notify.ratelimit import bucket_take
from notify.services import api_key_authenticate

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


class ApiKeyRateThrottle(throttling.BaseThrottle):
    """Token bucket per API key (R-IN4). Fails open: Redis down must not stop intake."""

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
