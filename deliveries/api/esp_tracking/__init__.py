"""The tracking webhook views of the email providers, on django-anymail's (one module each,
loaded on a provider's first post by provider_tracking.py).

anymail's view verifies each post the way its provider signs it and normalises its
events; `Tracking`, mixed in front of it, refuses every post while the provider's
secret is not configured (anymail would only warn), answers 400 to a post that is not a
tracking event, and hands each event, translated once by `provider_news`, to
`provider_event_apply` (no signal in between).
"""

from __future__ import annotations

import hashlib
import json
import logging
from typing import Any

from anymail.exceptions import AnymailError, AnymailWebhookValidationFailure
from anymail.signals import AnymailTrackingEvent, EventType, RejectReason
from django.conf import settings
from django.http import HttpRequest, HttpResponse, HttpResponseBadRequest

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
    # The person unsubscribed at the provider (its link, or the mailbox's one-click button
    # on the provider's List-Unsubscribe): marketing email is withdrawn. anymail's
    # `subscribed` (a resubscribe: Postmark's reactivation, SendGrid's group_resubscribe,
    # Brevo's list_addition, an SES opt-in) is deliberately absent: we never grant
    # consent again on a provider's word; the person does that with us.
    EventType.UNSUBSCRIBED: ProviderEventKind.UNSUBSCRIBED,
}
# Bounces each provider reports as temporary, by the field of its own event that says so
# (anymail calls every bounce `bounced`, and Mailgun's temporary failures `deferred`): a
# soft bounce is recorded and changes nothing (the provider keeps trying).
SOFT_BOUNCES: dict[str, tuple[tuple[str, ...], frozenset[str]]] = {
    "postmark": (("Type",), frozenset({"SoftBounce"})),
    "amazon_ses": (("bounce", "bounceType"), frozenset({"Transient", "Undetermined"})),
    "sendgrid": (("type",), frozenset({"blocked"})),
    "mailgun": (("event-data", "severity"), frozenset({"temporary"})),
    "brevo": (("event",), frozenset({"soft_bounce"})),
}
# A refusal by the provider for these reasons says the address itself is dead.
_HARD_REJECTS = frozenset({RejectReason.INVALID, RejectReason.BOUNCED})


def _soft(esp: str, raw: Any) -> bool:
    """Whether the provider's own event calls this bounce temporary."""
    path, values = SOFT_BOUNCES.get(esp, ((), frozenset()))
    for name in path:
        raw = raw.get(name) if isinstance(raw, dict) else None
    return bool(path) and raw in values


def provider_news(*, esp: str, event: AnymailTrackingEvent) -> ProviderNews | None:
    """Our reading of one anymail tracking event; None for kinds we do not act on or
    record (a resubscribe, inbound, unknown) and for events without a message id (an
    unsubscribe then names no message of ours: Postmark's suppression by an operator)."""
    kind = _KINDS.get(event.event_type)
    hard = False
    if event.event_type == EventType.REJECTED and event.reject_reason in _HARD_REJECTS:
        kind, hard = ProviderEventKind.BOUNCED, True
    elif kind in (ProviderEventKind.BOUNCED, ProviderEventKind.DEFERRED):
        if _soft(esp, event.esp_event):
            kind = ProviderEventKind.BOUNCED
        else:
            hard = kind == ProviderEventKind.BOUNCED
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


class Tracking:
    """Mixed in front of one provider's anymail tracking view (see the module doc)."""

    esp: str  # our name of the provider (NOTIFY_EMAIL_ESPS)
    warn_if_no_basic_auth = False  # refused instead (validate_request)

    def secret_configured(self) -> bool:
        """Whether the secret this provider's posts are verified with is set (basic
        auth's, unless the provider overrides)."""
        return bool(self.basic_auth)  # type: ignore[attr-defined]

    def validate_request(self, request: HttpRequest) -> None:
        if not self.secret_configured():
            raise AnymailWebhookValidationFailure("no webhook secret configured: refused")

    def post(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        try:
            self.run_validators(request)  # type: ignore[attr-defined]
            events = self.parse_events(request)  # type: ignore[attr-defined]
        except AnymailWebhookValidationFailure:
            raise  # answered 400 (a SuspiciousOperation), logged as one
        except (ValueError, TypeError, KeyError, AttributeError, AnymailError) as error:
            logger.info("%s tracking post refused: %s", self.esp, error)
            return HttpResponseBadRequest("not a tracking event")
        for event in events:
            news = provider_news(esp=self.esp, event=event)
            if news is None:
                logger.info("%s %s event: not acted on", self.esp, event.event_type)
                continue
            provider_event_apply(news=news)
        return HttpResponse()
