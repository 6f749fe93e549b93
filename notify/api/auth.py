"""API authentication (producer keys, end-user tokens), key scopes, and rate limits per caller."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from django.conf import settings
from redis.exceptions import RedisError
from rest_framework import authentication, exceptions, permissions, throttling

from notify.api_keys import api_key_authenticate
from notify.guard import recipient_reach_refusal
from notify.models import ApiKey, Producer, Recipient
from notify.ratelimit import bucket_key, bucket_take, user_bucket_key
from notify.selectors import recipient_id_get
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

    recipient_id: int
    is_authenticated: bool = True


class UserTokenAuthentication(authentication.BaseAuthentication):
    """`Authorization: Bearer ut_…`: a short-lived token for one recipient's own data.

    Any other bearer value is left to ApiKeyAuthentication. A valid token used on
    another user's data, or on a producer endpoint, is refused with 403 here, so no
    view can forget the check.

    A token reaches only views that set `user_token_allowed = True` (its feed, counter,
    preferences, preference-center link, and a browser or app registering and removing
    its own push subscription), and only for its own user id.

    The token's own user id is matched through the process's cache (recipient_id_get),
    so a token polling its count costs no query; an erased person's token is refused
    within NOTIFY_AUTH_CACHE_SECONDS.
    """

    def authenticate(self, request):
        header = authentication.get_authorization_header(request).split()
        if len(header) != 2 or header[0].lower() != b"bearer":
            return None
        token = header[1].decode("utf-8", "replace")
        if not token.startswith(USER_TOKEN_PREFIX):
            return None
        recipient_id = user_token_recipient_id(token)
        if recipient_id is None:
            raise exceptions.AuthenticationFailed("Invalid or expired user token.")
        context = request.parser_context or {}
        if getattr(context.get("view"), "user_token_allowed", False):
            user_id = context.get("kwargs", {}).get("user_id")
            if isinstance(user_id, str) and recipient_id_get(user_id=user_id) == recipient_id:
                return UserPrincipal(recipient_id=recipient_id), token
        # Refused: 401 when the token's recipient is gone, 403 when it is someone else's
        # data or a producer endpoint (one query, on this path only).
        if not Recipient.objects.filter(pk=recipient_id).exists():
            raise exceptions.AuthenticationFailed("Invalid or expired user token.")
        raise exceptions.PermissionDenied("This user token may not access this resource.")

    def authenticate_header(self, request) -> str:
        return 'Bearer realm="notify"'


def view_scope(view: object, method: str) -> str | tuple[str, ...] | None:
    """The scope an API key needs for this view's method; None when the view states none.

    Each view states its own as `required_scope`: one scope for every method, or a
    {method: scope} map; a tuple of scopes means any one of them. An operation without
    one is refused to every key (deny by default).
    """
    scope = getattr(view, "required_scope", None)
    if isinstance(scope, dict):
        return scope.get(method.upper())
    return scope


def api_key_scope_refusal(api_key: ApiKey, scope: str | tuple[str, ...] | None) -> str | None:
    """Why the key may not perform an operation that needs `scope` (a message), or None
    when it may. A key holds exactly the scopes it lists (least privilege)."""
    if scope is None:
        return "This API key's scopes do not cover this operation."
    wanted = (scope,) if isinstance(scope, str) else scope
    if not any(api_key.has_scope(one) for one in wanted):
        return f"This API key lacks the {' or '.join(repr(one) for one in wanted)} scope."
    return None


class ApiKeyScopes(permissions.BasePermission):
    """403 `missing_scope` when the request's API key lacks the operation's scope, and
    403 `recipient_not_granted` when the operation is on a person (a `user_id` in its
    path) that the key's producer may not reach (notify.guard.recipient_reach_refusal:
    never while recipients are shared, the default). Checked here, for every operation,
    so no view can forget it.

    End-user tokens are limited by UserTokenAuthentication instead.
    """

    def has_permission(self, request, view) -> bool:
        principal = request.user
        if not isinstance(principal, ProducerPrincipal):
            return True
        if request.method.lower() not in getattr(view, "http_method_names", ()) or not hasattr(
            view, request.method.lower()
        ):
            return True  # a method the operation does not have: DRF answers 405 with Allow
        refusal = api_key_scope_refusal(principal.api_key, view_scope(view, request.method))
        if refusal is not None:
            # Not ApiError: errors.py imports DRF's views, which import this module.
            raise exceptions.PermissionDenied(refusal, code="missing_scope")
        user_id = getattr(view, "kwargs", {}).get("user_id")
        if isinstance(user_id, str):
            refusal = recipient_reach_refusal(producer=principal.producer, user_id=user_id)
            if refusal is not None:
                raise exceptions.PermissionDenied(refusal, code="recipient_not_granted")
        return True


@dataclass(frozen=True)
class Bucket:
    """The token bucket a request draws from: its Redis key and its rate."""

    key: str
    rate: float
    burst: int


def request_bucket(principal: object) -> Bucket | None:
    """The bucket for this caller: one per API key, one per end user; None when anonymous.

    A key's own rate (set in admin) wins over NOTIFY_API_RATE_PER_SECOND/BURST.
    """
    if isinstance(principal, ProducerPrincipal):
        api_key = principal.api_key
        return Bucket(
            key=bucket_key("key", api_key.pk),
            rate=api_key.rate_per_second or settings.NOTIFY_API_RATE_PER_SECOND,
            burst=api_key.rate_burst or settings.NOTIFY_API_RATE_BURST,
        )
    if isinstance(principal, UserPrincipal):
        return Bucket(
            key=user_bucket_key(principal.recipient_id),
            rate=settings.NOTIFY_USER_RATE_PER_SECOND,
            burst=settings.NOTIFY_USER_RATE_BURST,
        )
    return None


class RateLimiterUnavailable(exceptions.APIException):
    """503 when Redis, which holds the buckets, is down and the limiter fails closed."""

    status_code = 503
    default_detail = "The rate limiter is unavailable; retry shortly."
    default_code = "rate_limiter_unavailable"
    wait = 1  # DRF's handler turns it into Retry-After


@dataclass(frozen=True)
class ReadAlong:
    """A Redis string read in the rate limit's round trip: its key and its value (None
    when the key is absent)."""

    key: str
    value: bytes | None


class ApiRateThrottle(throttling.BaseThrottle):
    """Every API operation draws from its caller's bucket (`request_bucket`): 429 with
    Retry-After when empty.

    A view whose answer is one Redis read may define `read_along_key(request)` (the key,
    or None); the throttle then reads that key in the same round trip as the take and
    leaves it in the view's `read_along` (a ReadAlong), so the view asks Redis nothing more.

    With Redis unreachable NOTIFY_API_RATE_LIMIT_FAIL_OPEN decides: let the request
    through (the default: Redis holds only the buckets, so its outage must not stop
    intake, which needs only PostgreSQL) or refuse it with 503.
    """

    def __init__(self) -> None:
        self._wait: float | None = None

    def allow_request(self, request, view) -> bool:
        bucket = request_bucket(request.user)
        if bucket is None:
            return True
        key_of = getattr(view, "read_along_key", None)
        read_key = key_of(request) if key_of is not None else None
        try:
            take = bucket_take(
                key=bucket.key, rate=bucket.rate, burst=bucket.burst, read_along=read_key
            )
        except RedisError:
            if settings.NOTIFY_API_RATE_LIMIT_FAIL_OPEN:
                logger.warning("API rate limit skipped: Redis unavailable")
                return True
            raise RateLimiterUnavailable() from None
        if read_key is not None:
            view.read_along = ReadAlong(key=read_key, value=take.read_along)
        self._wait = take.wait_seconds
        return take.allowed

    def wait(self) -> float | None:
        return self._wait
