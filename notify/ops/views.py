"""/healthz and /readyz: plain Django views, outside the API's auth and errors."""

from __future__ import annotations

from django.http import HttpRequest, JsonResponse
from django.views.decorators.http import require_GET

from notify.ops.health import CHECKS, dependencies_down


@require_GET
def healthz(request: HttpRequest) -> JsonResponse:
    """The process is up and serving; touches no dependency (a liveness probe)."""
    return JsonResponse({"status": "ok"})


@require_GET
def readyz(request: HttpRequest) -> JsonResponse:
    """200 when PostgreSQL, RabbitMQ and Redis all answer; 503 naming each that does not
    (by name only: the reason is in the log, never in the answer)."""
    down = dependencies_down()
    body = {
        "status": "unavailable" if down else "ok",
        "checks": {name: ("down" if name in down else "ok") for name in CHECKS},
        "down": sorted(down),
    }
    return JsonResponse(body, status=503 if down else 200)
