"""One JSON error shape everywhere: {"error": {"code", "message", "field"?}}."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import PermissionDenied
from django.http import Http404, JsonResponse
from rest_framework import exceptions, status
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler


class ApiError(exceptions.APIException):
    """An error with our own code, message and (optionally) the field at fault."""

    def __init__(
        self, status_code: int, code: str, message: str, *, field: str | None = None
    ) -> None:
        super().__init__(detail=message, code=code)
        self.status_code = status_code
        self.error_code = code
        self.field = field


def error_body(code: str, message: str, field: str | None = None) -> dict[str, Any]:
    error: dict[str, Any] = {"code": code, "message": message}
    if field:
        error["field"] = field
    return {"error": error}


def first_validation_error(detail: Any, path: str = "") -> tuple[str, str, str]:
    """(field path, message, code) of the first error in a DRF validation detail."""
    if isinstance(detail, dict):
        for key, value in detail.items():
            name = "" if key == "non_field_errors" else str(key)
            return first_validation_error(
                value, f"{path}.{name}" if path and name else path or name
            )
    if isinstance(detail, list) and detail:
        first = detail[0]
        if isinstance(first, dict | list):
            return first_validation_error(first, f"{path}.0" if path else "0")
        return first_validation_error(first, path)
    code = getattr(detail, "code", "invalid")
    return path, str(detail), str(code)


_CODES = {
    exceptions.NotAuthenticated: "not_authenticated",
    exceptions.AuthenticationFailed: "authentication_failed",
    exceptions.PermissionDenied: "forbidden",
    exceptions.NotFound: "not_found",
    exceptions.MethodNotAllowed: "method_not_allowed",
    exceptions.UnsupportedMediaType: "unsupported_media_type",
    exceptions.ParseError: "malformed_json",
    exceptions.Throttled: "rate_limited",
}


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    """DRF's handler (status, headers such as Retry-After), reshaped to our error body."""
    if isinstance(exc, Http404):
        exc = exceptions.NotFound()
    elif isinstance(exc, PermissionDenied):
        exc = exceptions.PermissionDenied()
    response = drf_exception_handler(exc, context)
    if response is None:
        return None
    if isinstance(exc, ApiError):
        response.data = error_body(exc.error_code, str(exc.detail), exc.field)
    elif isinstance(exc, exceptions.ValidationError):
        field, message, _ = first_validation_error(exc.detail)
        response.data = error_body("invalid", message, field or None)
        response.status_code = status.HTTP_400_BAD_REQUEST
    else:
        code = next((c for cls, c in _CODES.items() if isinstance(exc, cls)), None)
        # Raised with a code of its own (e.g. PermissionDenied(code="missing_scope")), or
        # an exception of ours that DRF does not know (its default code): keep it.
        own = getattr(getattr(exc, "detail", None), "code", None)
        if isinstance(own, str) and (code is None or own != getattr(exc, "default_code", own)):
            code = own
        response.data = error_body(code or "error", str(getattr(exc, "detail", exc)))
    return response


def json_not_found(request, exception=None):
    """404 for URLs under /v1/ as JSON; the admin keeps Django's HTML page."""
    if request.path.startswith("/v1/"):
        return JsonResponse(error_body("not_found", "No such endpoint."), status=404)
    from django.views.defaults import page_not_found

    return page_not_found(request, exception)


def json_server_error(request):
    if request.path.startswith("/v1/"):
        return JsonResponse(
            error_body("server_error", "Internal error; please retry."),
            status=500,
        )
    from django.views.defaults import server_error

    return server_error(request)
