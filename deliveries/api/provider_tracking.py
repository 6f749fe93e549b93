"""Email providers' tracking webhooks: `POST /v1/webhooks/email/<esp>/tracking/`.

django-anymail's tracking webhook views verify each post the way its provider
authenticates it (Postmark: HTTP basic auth, ANYMAIL["WEBHOOK_SECRET"]) and normalise
its events; here each normalised event is translated once and handed to
`provider_event_apply` (no signal in between). A post that fails verification is
answered 400 and records nothing; without a configured secret every post is refused.
An event about a message we do not know is answered 200 (the provider must not retry
it) and logged; it waits for its send's record (it may have overtaken it) and is applied
then, or given up as unmatched (deliveries/pipeline/provider_events.py).
"""

from __future__ import annotations

import hashlib
import json
import logging
from typing import Any

from anymail.exceptions import AnymailConfigurationError, AnymailWebhookValidationFailure
from anymail.signals import AnymailTrackingEvent, EventType, RejectReason
from anymail.webhooks.postmark import PostmarkTrackingWebhookView
from django.conf import settings
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseBadRequest
from django.views.decorators.csrf import csrf_exempt

from deliveries.models import ProviderEventKind
from deliveries.pipeline.provider_events import ProviderNews, provider_event_apply

logger = logging.getLogger(__name__)

_KINDS = {
    EventType.DELIVERED: ProviderEventKind.DELIVERED,
    EventType.BOUNCED: ProviderEventKind.BOUNCED,
    EventType.COMPLAINED: ProviderEventKind.COMPLAINED,
    EventType.OPENED: ProviderEventKind.OPENED,
    EventType.CLICKED: ProviderEventKind.CLICKED,
    EventType.DEFERRED: ProviderEventKind.DEFERRED,
}
# Bounces the provider reports as temporary (anymail calls every bounce `bounced`).
SOFT_BOUNCE_TYPES = {"postmark": frozenset({"SoftBounce"})}
# A refusal by the provider for these reasons says the address itself is dead.
_HARD_REJECTS = frozenset({RejectReason.INVALID, RejectReason.BOUNCED})


def provider_news(*, esp: str, event: AnymailTrackingEvent) -> ProviderNews | None:
    """Our reading of one anymail tracking event; None for kinds we do not act on or
    record (subscription changes, inbound, unknown) and for events without a message id."""
    kind = _KINDS.get(event.event_type)
    hard = False
    if event.event_type == EventType.REJECTED and event.reject_reason in _HARD_REJECTS:
        kind, hard = ProviderEventKind.BOUNCED, True
    elif kind == ProviderEventKind.BOUNCED:
        raw = event.esp_event if isinstance(event.esp_event, dict) else {}
        hard = raw.get("Type") not in SOFT_BOUNCE_TYPES.get(esp, frozenset())
    if kind is None or not event.message_id:
        return None
    if event.event_id:
        key = f"{kind}:{event.event_id}"
    else:  # delivered, opens and clicks carry no id: the event as posted is its identity
        posted = json.dumps(event.esp_event, sort_keys=True, default=str)
        key = "sha256:" + hashlib.sha256(posted.encode()).hexdigest()
    detail = " ".join(
        str(part) for part in (event.description, event.mta_response, event.click_url) if part
    )
    return ProviderNews(
        esp=esp,
        key=key[:128],
        kind=kind,
        message_id=str(event.message_id)[:255],
        hard=hard,
        occurred_at=event.timestamp,
        detail=detail[: settings.NOTIFY_PROVIDER_EVENT_DETAIL_CHARS],
    )


class _Refuse:
    """Refuse every post while no webhook secret is configured (anymail would only warn)."""

    def validate_request(self, request: HttpRequest) -> None:
        if not self.basic_auth:  # type: ignore[attr-defined]
            raise AnymailWebhookValidationFailure("no webhook secret configured: refused")


class PostmarkTracking(_Refuse, PostmarkTrackingWebhookView):
    warn_if_no_basic_auth = False  # refused instead (_Refuse)

    def post(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        self.run_validators(request)
        try:
            events = self.parse_events(request)
        except (ValueError, TypeError, KeyError, AttributeError, AnymailConfigurationError):
            return HttpResponseBadRequest("not a tracking event")
        for event in events:
            news = provider_news(esp="postmark", event=event)
            if news is None:
                logger.info("postmark %s event: not acted on", event.event_type)
                continue
            provider_event_apply(news=news)
        return HttpResponse()


_VIEWS = {"postmark": PostmarkTracking.as_view()}


@csrf_exempt  # authenticated as its provider signs, not by a browser session
def esp_tracking(request: HttpRequest, esp: str) -> HttpResponse:
    """The tracking webhook of one provider; 404 for a provider we do not speak."""
    view = _VIEWS.get(esp)
    if view is None:
        raise Http404("no such provider")
    return view(request)
