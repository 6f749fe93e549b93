"""/metrics: a plain Django view, outside the API's auth and errors."""

from __future__ import annotations

import hmac
import ipaddress

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.http import require_GET
from prometheus_client import CONTENT_TYPE_LATEST

from deliveries.ops.metrics import metrics_render


@require_GET
def metrics(request: HttpRequest) -> HttpResponse:
    """Prometheus text format, for a holder of NOTIFY_METRICS_TOKEN (or loopback if unset)."""
    refusal = _metrics_refusal(request)
    if refusal is not None:
        return refusal
    return HttpResponse(metrics_render(), content_type=CONTENT_TYPE_LATEST)


def _metrics_refusal(request: HttpRequest) -> HttpResponse | None:
    token = settings.NOTIFY_METRICS_TOKEN
    if token:
        given = request.headers.get("Authorization", "")
        scheme, _, value = given.partition(" ")
        if scheme.lower() == "bearer" and hmac.compare_digest(
            value.strip().encode(), token.encode()
        ):
            return None
        response = JsonResponse({"detail": "A valid metrics bearer token is required."}, status=401)
        response["WWW-Authenticate"] = 'Bearer realm="metrics"'
        return response
    if _is_loopback(request.META.get("REMOTE_ADDR", "")):
        return None
    return JsonResponse(
        {"detail": "Metrics are served only to loopback while NOTIFY_METRICS_TOKEN is unset."},
        status=403,
    )


def _is_loopback(address: str) -> bool:
    try:
        return ipaddress.ip_address(address).is_loopback
    except ValueError:
        return False
