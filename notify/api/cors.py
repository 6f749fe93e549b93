"""Cross-origin access to the end-user API, so that a product's own pages (on their own
origin) can embed the inbox component and call Notify from the browser.

Only for origins listed in NOTIFY_INBOX_ALLOWED_ORIGINS, and only on the operations an
end-user token may reach: those whose view says `user_token_allowed = True`, the flag
UserTokenAuthentication reads too (so this module names no route of any app). Producer
endpoints never answer a browser from elsewhere. Tokens travel in the
Authorization header, never in cookies, so no credentials mode is offered. A request
without an Origin header (every server-to-server call) passes through untouched.
"""

from __future__ import annotations

from asgiref.sync import iscoroutinefunction, markcoroutinefunction
from django.conf import settings
from django.http import HttpRequest, HttpResponse, HttpResponseBase
from django.urls import Resolver404, resolve
from django.utils.cache import patch_vary_headers

ALLOW_METHODS = "GET, POST, PUT, DELETE"
ALLOW_HEADERS = "Authorization, Content-Type, Last-Event-ID"
EXPOSE_HEADERS = "Retry-After"  # a 429's advice, which the component waits by


def cors_origin_allowed(origin: str) -> bool:
    """Whether a browser page on `origin` may call the end-user API."""
    allowed = settings.NOTIFY_INBOX_ALLOWED_ORIGINS
    return "*" in allowed or origin in allowed


def user_token_path(path_info: str) -> bool:
    """Whether the view at this path accepts an end-user token (`user_token_allowed`
    on its class, or on the function of a plain view such as the stream)."""
    try:
        match = resolve(path_info)
    except Resolver404:
        return False
    view = getattr(match.func, "view_class", match.func)  # as_view() keeps its class there
    return getattr(view, "user_token_allowed", False) is True


def _cross_origin(request: HttpRequest) -> str | None:
    """The request's Origin when it is an allowed one on an end-user path, else None."""
    origin = request.META.get("HTTP_ORIGIN")  # META: no headers mapping built for it
    # The origin first: resolving the path is only paid by browsers of listed origins.
    if not origin or not cors_origin_allowed(origin):
        return None
    return origin if user_token_path(request.path_info) else None


def _preflight(origin: str) -> HttpResponse:
    response = HttpResponse(status=204)
    response["Access-Control-Allow-Origin"] = origin
    response["Access-Control-Allow-Methods"] = ALLOW_METHODS
    response["Access-Control-Allow-Headers"] = ALLOW_HEADERS
    response["Access-Control-Max-Age"] = str(settings.NOTIFY_INBOX_CORS_MAX_AGE)
    patch_vary_headers(response, ("Origin",))
    return response


def _decorate(origin: str, response: HttpResponseBase) -> HttpResponseBase:
    response["Access-Control-Allow-Origin"] = origin
    response["Access-Control-Expose-Headers"] = EXPOSE_HEADERS
    patch_vary_headers(response, ("Origin",))
    return response


def _is_preflight(request: HttpRequest) -> bool:
    return request.method == "OPTIONS" and "Access-Control-Request-Method" in request.headers


class EndUserCorsMiddleware:
    """Answers preflights and marks responses for allowed origins on end-user paths.

    Sync and async alike, so the async stream view keeps running without a thread hop.
    """

    sync_capable = True
    async_capable = True

    def __init__(self, get_response) -> None:
        self.get_response = get_response
        # Decided once: asking on every request costs more than the rest of this class.
        self._async = iscoroutinefunction(get_response)
        if self._async:
            markcoroutinefunction(self)

    def __call__(self, request: HttpRequest):
        if self._async:
            return self._acall(request)
        origin = _cross_origin(request)
        if origin is None:
            return self.get_response(request)
        if _is_preflight(request):
            return _preflight(origin)
        return _decorate(origin, self.get_response(request))

    async def _acall(self, request: HttpRequest):
        origin = _cross_origin(request)
        if origin is None:
            return await self.get_response(request)
        if _is_preflight(request):
            return _preflight(origin)
        return _decorate(origin, await self.get_response(request))
