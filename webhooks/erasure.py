"""Erasure, the status webhooks' part: the events about the person. Called by
campaigns.erasure.person_erase, in its transaction."""

from __future__ import annotations

from notify.models import Recipient
from webhooks.models import WebhookEvent


def webhook_events_erase(*, recipient: Recipient) -> dict[str, int]:
    """Delete the status webhook events about the person: they name them (their user id)
    and are posted to the producer, so those not yet posted are not posted any more."""
    deleted = WebhookEvent.objects.filter(recipient_id=recipient.pk).delete()[1]
    return {"webhook_events": deleted.get(WebhookEvent._meta.label, 0)}
