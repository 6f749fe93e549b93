"""The web process's WSGI handler: Django's, with a short middleware stack for the views
that need nothing of what the rest of MIDDLEWARE does.

A view says so with `lean_stack = True` on its class (or its function). Such a view is
one that no browser session reaches: token-authenticated, CSRF-exempt, never reading a
cookie, a message or Django's user. Sessions, CSRF, messages and Django's
authentication do nothing for it but still cost every request, which matters on a read
polled by every open page (the badge's unread count). Those views run through
NOTIFY_LEAN_MIDDLEWARE instead: the middleware whose work they do need (security
headers, CORS, the Host check and Content-Length, X-Frame-Options), in the same order.
Every other view runs through MIDDLEWARE as before.

The path is resolved once, before the middleware, to pick the stack; Django's own
resolution after the middleware reuses that match, so no view pays for two.
"""

from __future__ import annotations

from django.conf import settings
from django.core.handlers.exception import convert_exception_to_response
from django.core.handlers.wsgi import WSGIHandler
from django.http import HttpRequest, HttpResponseBase
from django.urls import Resolver404, ResolverMatch, get_resolver, set_urlconf
from django.utils.log import log_response
from django.utils.module_loading import import_string


def view_is_lean(match: ResolverMatch) -> bool:
    """Whether the resolved view asks for the lean middleware stack (`lean_stack`)."""
    view = getattr(match.func, "view_class", match.func)  # as_view() keeps its class there
    return getattr(view, "lean_stack", False) is True


class NotifyWSGIHandler(WSGIHandler):
    """WSGIHandler with a second, shorter middleware chain for lean views."""

    def load_middleware(self, is_async: bool = False) -> None:
        super().load_middleware(is_async)
        # Built as Django builds MIDDLEWARE's chain (sync: this is the WSGI handler). The
        # hooks the full stack registered (process_view and the like) still run around
        # the view; of them only CsrfViewMiddleware's exists, and it passes views that
        # are CSRF-exempt, as lean views are.
        handler = convert_exception_to_response(self._get_response)
        for middleware_path in reversed(settings.NOTIFY_LEAN_MIDDLEWARE):
            handler = convert_exception_to_response(import_string(middleware_path)(handler))
        self._lean_chain = handler

    def get_response(self, request: HttpRequest) -> HttpResponseBase:
        """Django's get_response, through the lean chain when the path's view is lean."""
        set_urlconf(settings.ROOT_URLCONF)
        chain = self._lean_chain if self._resolve_early(request) else self._middleware_chain
        response = chain(request)
        response._resource_closers.append(request.close)
        if response.status_code >= 400:
            log_response(
                "%s: %s", response.reason_phrase, request.path, response=response, request=request
            )
        return response

    def _resolve_early(self, request: HttpRequest) -> bool:
        """Resolve the path with the root URLconf, keep the match for resolve_request, and
        say whether its view is lean; False when nothing matches (the full stack then
        answers the 404, as before)."""
        try:
            match = get_resolver().resolve(request.path_info)
        except Resolver404:
            return False
        request._early_match = (request.path_info, match)  # type: ignore[attr-defined]
        return view_is_lean(match)

    def resolve_request(self, request: HttpRequest) -> ResolverMatch:
        """The early match when nothing since has changed the path or the URLconf (a
        middleware may set `request.urlconf`); else Django's own resolution."""
        early = getattr(request, "_early_match", None)
        if early is None or hasattr(request, "urlconf") or early[0] != request.path_info:
            return super().resolve_request(request)
        request.resolver_match = early[1]
        return early[1]
