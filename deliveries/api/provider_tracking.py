"""Email providers' tracking webhooks: `POST /v1/webhooks/email/<esp>/tracking/`.

The URL of every provider we speak (NOTIFY_EMAIL_ESPS), whichever one sends now: events
about messages sent before a switch still arrive. Each provider's view is django-anymail's,
verified the way that provider signs its posts (deliveries/api/esp_tracking/); it is
imported on that provider's first post, so a web process that never receives one never
loads anymail. A post that fails verification is answered 4xx and records nothing;
without the provider's configured secret every post is refused. An event about a
message we do not know is answered 200 (the provider must not retry it) and logged; it
waits for its send's record (it may have overtaken it) and is applied then, or given up
as unmatched (deliveries/pipeline/provider_events.py).
"""

from __future__ import annotations

from importlib import import_module

from django.conf import settings
from django.http import Http404, HttpRequest, HttpResponse
from django.views.decorators.csrf import csrf_exempt

# The package of the providers' views; `<package>.<esp>.view` is one provider's.
VIEWS_PACKAGE = "deliveries.api.esp_tracking"


@csrf_exempt  # authenticated as its provider signs, not by a browser session
def esp_tracking(request: HttpRequest, esp: str) -> HttpResponse:
    """The tracking webhook of one provider; 404 for a provider we do not speak."""
    if esp not in settings.NOTIFY_EMAIL_ESPS:
        raise Http404("no such provider")
    return import_module(f"{VIEWS_PACKAGE}.{esp}").view(request)
