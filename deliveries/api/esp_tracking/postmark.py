"""Postmark's tracking webhook: HTTP basic auth (the credentials in the webhook's URL).

A Subscription change is acted on only for the person's own unsubscribe (and read, not
acted on, for a reactivation). Postmark also posts one when it suppresses an address for
a hard bounce or a spam complaint: those are already reported by the Bounce and Spam
complaint webhooks (with their ids and details), so they are left to them rather than
applied twice (a second consent record, a second `delivery.complained`).
"""

from __future__ import annotations

from typing import Any

from anymail.signals import AnymailTrackingEvent, EventType
from anymail.webhooks.postmark import PostmarkTrackingWebhookView

from deliveries.api.esp_tracking import Tracking

# Suppression reasons reported by Postmark's other webhooks as well.
_REPORTED_ELSEWHERE = frozenset({"HardBounce", "SpamComplaint"})


class PostmarkTracking(Tracking, PostmarkTrackingWebhookView):
    esp = "postmark"

    def esp_to_anymail_event(self, esp_event: dict[str, Any]) -> AnymailTrackingEvent:
        """anymail's event; a suppression for a bounce or complaint is not ours to apply."""
        event = super().esp_to_anymail_event(esp_event)
        if (
            esp_event.get("RecordType") == "SubscriptionChange"
            and esp_event.get("SuppressionReason") in _REPORTED_ELSEWHERE
        ):
            event.event_type = EventType.UNKNOWN
        return event


view = PostmarkTracking.as_view()
