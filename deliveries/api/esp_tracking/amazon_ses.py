"""Amazon SES's events, through an SNS topic subscribed to our tracking URL over HTTPS.

Verified by HTTP basic auth: the subscription's URL carries NOTIFY_ESP_WEBHOOK_SECRET
(`https://user:password@host/v1/webhooks/email/amazon_ses/tracking/`); SNS first posts
without it and sends it after our 401 challenge. anymail also checks that the SNS
message type and id headers match the body; it does not verify SNS message signatures,
so we do (sns_signature.py), after the basic auth, and, with NOTIFY_SNS_TOPIC_ARNS set,
accept only those topics. A post that fails any of it is answered 400, recording nothing.

A SubscriptionConfirmation (authenticated like every post) is confirmed by fetching its
SubscribeURL, and only one on Amazon SNS itself (https, sns.<region>.amazonaws.com):
anything else is refused unfetched, so a post can never make us call another host.

SES's `Subscription` event (its list management: the person opted out or in, by the
unsubscribe header or link SES added) is one anymail does not know (it calls it
unknown): an opt-out is read as `unsubscribed` here, an opt-in as `subscribed` (which
we do not act on).
"""

from __future__ import annotations

import logging
from typing import Any

from anymail.exceptions import AnymailAPIError, AnymailWebhookValidationFailure
from anymail.signals import AnymailTrackingEvent, EventType
from anymail.webhooks.amazon_ses import AmazonSESTrackingWebhookView
from django.conf import settings
from django.http import HttpRequest, HttpResponse

from deliveries.api.esp_tracking import Tracking
from deliveries.api.esp_tracking.sns_signature import (
    SignatureRefused,
    sns_signature_verify,
    sns_url_allowed,
)
from egress.sessions import bounded_session

logger = logging.getLogger(__name__)


class AmazonSESTracking(Tracking, AmazonSESTrackingWebhookView):
    esp = "amazon_ses"

    def post(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if self.basic_auth and not request.META.get("HTTP_AUTHORIZATION"):
            # SNS sends the URL's credentials only after a 401 challenge.
            response = HttpResponse(status=401)
            response["WWW-Authenticate"] = 'Basic realm="Notify tracking"'
            return response
        return super().post(request, *args, **kwargs)

    def run_validators(self, request: HttpRequest) -> None:
        """anymail's checks (basic auth first, the SNS headers against the body), then
        the message's SNS signature: only a post that passed the rest may make us fetch
        a signing certificate."""
        super().run_validators(request)
        message = self._parse_sns_message(request)
        try:
            sns_signature_verify(message)
        except SignatureRefused as error:
            raise AnymailWebhookValidationFailure(f"SNS signature refused: {error}") from None
        topics = settings.NOTIFY_SNS_TOPIC_ARNS
        if topics and message.get("TopicArn") not in topics:
            raise AnymailWebhookValidationFailure(
                f"SNS topic {str(message.get('TopicArn'))[:200]!r} is not one of ours"
            )

    def esp_to_anymail_events(
        self, ses_event: dict, sns_message: dict
    ) -> list[AnymailTrackingEvent]:
        """anymail's events, with SES's `Subscription` read as an opt-out or an opt-in."""
        events = super().esp_to_anymail_events(ses_event, sns_message)
        if ses_event.get("eventType") == "Subscription":
            change = ses_event.get("subscription") or {}
            kind = EventType.UNSUBSCRIBED if _opted_out(change) else EventType.SUBSCRIBED
            for event in events:
                event.event_type = kind
                event.description = f"{change.get('source', '')} {change.get('contactList', '')}"
        return events

    def auto_confirm_sns_subscription(self, sns_message: dict) -> None:
        """Confirm the subscription by fetching its SubscribeURL, if it is Amazon SNS's."""
        if not self.auto_confirm_enabled:
            return
        url = str(sns_message.get("SubscribeURL") or "")
        if not sns_url_allowed(url):
            raise AnymailWebhookValidationFailure(
                f"SNS SubscribeURL {url[:200]!r} is not Amazon SNS's: not fetched"
            )
        session = bounded_session(
            settings.NOTIFY_ESP_CALL_DEADLINE, settings.NOTIFY_ESP_MAX_RESPONSE_BYTES
        )
        answer = session.get(url)
        if answer.status_code != 200:
            raise AnymailAPIError(f"SNS subscription not confirmed: {answer.status_code}")
        logger.info("SNS subscription confirmed for topic %s", sns_message.get("TopicArn"))


def _opted_out(change: dict) -> bool:
    """Whether the person opted out in this change: of everything on the contact list, or
    of a topic they were not opted out of before."""
    new, old = change.get("newTopicPreferences") or {}, change.get("oldTopicPreferences") or {}
    if new.get("unsubscribeAll") and not old.get("unsubscribeAll"):
        return True
    before = {
        t.get("topicName"): t.get("subscriptionStatus")
        for t in old.get("topicSubscriptionStatus") or []
    }
    return any(
        t.get("subscriptionStatus") == "OptOut" and before.get(t.get("topicName")) != "OptOut"
        for t in new.get("topicSubscriptionStatus") or []
    )


view = AmazonSESTracking.as_view()
