"""The words of a delivery's story: its statuses, which of them are final, and the reasons
support reads (the gate's decisions and the sender's)."""

from __future__ import annotations

from django.db import models

from preferences.gate import GateReason


class DeliveryStatus(models.TextChoices):
    QUEUED = "queued", "Queued"
    SENDING = "sending", "Sending"
    RETRYING = "retrying", "Retrying"
    DELIVERED = "delivered", "Delivered"
    # The provider said it handed the message to the person (an email provider's
    # `delivered` event, an SMSC's DELIVRD receipt): further than `delivered`, which is
    # its acceptance.
    REACHED = "reached", "Reached the person (the provider delivered it)"
    FAILED = "failed", "Failed (permanent)"
    DEAD = "dead", "Dead (retries exhausted)"
    EXPIRED = "expired", "Expired (past deadline)"
    SUPPRESSED = "suppressed", "Suppressed"
    DEFERRED = "deferred", "Deferred"
    SKIPPED_LIVE = "skipped_live", "Skipped (device live)"
    CANCELLED = "cancelled", "Cancelled"
    SUPERSEDED = "superseded", "Superseded (a newer event about it got there first)"
    DIGESTING = "digesting", "Waiting in an open digest window"
    DIGESTED = "digested", "Sent inside a digest (see its window)"
    SKIPPED_READ = "skipped_read", "Skipped (the in-app entry was read first)"


FINAL_STATUSES = frozenset(
    {
        DeliveryStatus.DELIVERED,
        DeliveryStatus.REACHED,
        DeliveryStatus.FAILED,
        DeliveryStatus.DEAD,
        DeliveryStatus.EXPIRED,
        DeliveryStatus.SUPPRESSED,
        DeliveryStatus.SKIPPED_LIVE,
        DeliveryStatus.CANCELLED,
        DeliveryStatus.SUPERSEDED,
        DeliveryStatus.DIGESTED,
        DeliveryStatus.SKIPPED_READ,
    }
)
CLAIMABLE_STATUSES = (DeliveryStatus.QUEUED, DeliveryStatus.RETRYING)


def _gate(reason: GateReason) -> tuple[str, str]:
    return reason.value, reason.label


class Reason(models.TextChoices):
    """Why a delivery did not go out (or not yet); shown to support in plain words.

    The first group is the gate's (it decides them); the rest are the sender's.
    """

    OPTED_OUT = _gate(GateReason.OPTED_OUT)
    NO_CONSENT = _gate(GateReason.NO_CONSENT)
    QUIET_HOURS = _gate(GateReason.QUIET_HOURS)
    FREQUENCY_CAP = _gate(GateReason.FREQUENCY_CAP)
    NO_ADDRESS = _gate(GateReason.NO_ADDRESS)
    UNSUBSCRIBED = _gate(GateReason.UNSUBSCRIBED)
    CHANNEL_UNAVAILABLE = _gate(GateReason.CHANNEL_UNAVAILABLE)
    ERASURE_HOLD = _gate(GateReason.ERASURE_HOLD)
    NOT_GATED = "not_gated", "Created outside the gate; refused by the sender"
    NO_TEMPLATE = "no_template", "No published template for this category and channel"
    RENDER_ERROR = "render_error", "The template could not be rendered"
    RENDER_LIMIT = "render_limit", "Rendering the template took too long or grew too large"
    REJECTED = "rejected", "The provider refused it permanently"
    BOUNCED = "bounced", "Accepted by the provider, then bounced hard by the mailbox"
    RETRIES_EXHAUSTED = "retries_exhausted", "Every retry failed"
    CLAIM_RECOVERED_TOO_OFTEN = (
        "claim_recovered_too_often",
        "Its sender was lost mid-send too many times (NOTIFY_CLAIM_RECOVERIES_MAX)",
    )
    DEADLINE_PASSED = "deadline_passed", "The next retry would fall past the deadline"
    CATEGORY_SETTING_INVALID = (
        "category_setting_invalid",
        "Its category's digest window or delay on this channel cannot be computed (too "
        "large, or not a number): fix the category; the rest of the batch went on",
    )
    PUSH_LIMIT = "push_limit", "The recipient already had the most push jobs in flight"
    CAMPAIGN_PAUSED = "campaign_paused", "Held while its campaign is paused"
    CAMPAIGN_CANCELLED = "campaign_cancelled", "Its campaign was cancelled"
    ADDRESS_SUPPRESSED = (
        "address_suppressed",
        "The address bounced hard before (see Address suppressions); not tried again",
    )
    IN_DIGEST = "in_digest", "Listed in the digest its window sent (see Digest windows)"
    DELAYED_IF_UNREAD = (
        "delayed_if_unread",
        "Waits, and goes only if the in-app entry is still unread then",
    )
    READ_IN_APP = "read_in_app", "The person read the in-app entry before the delay ended"
    SEEN_LIVE = (
        "seen_live",
        "The live stream showed the person the in-app entry before the delay ended",
    )
    NEWER_DELIVERED = (
        "newer_delivered",
        "A newer event about the same subject already reached the person on this channel",
    )
