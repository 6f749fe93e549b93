"""The PostgreSQL side of analytics: events waiting to be shipped, and erasures waiting to
reach the store. Both are queues: the shipper deletes what it has applied."""

from __future__ import annotations

from django.db import models


class EventKind(models.TextChoices):
    """What one event counts (docs/analytics.md has each one's moment)."""

    ACCEPTED = "accepted", "A delivery was created for a channel (the audience)"
    SUPPRESSED = "suppressed", "Not sent: the gate or the bounce list (with the reason)"
    DIGESTED = "digested", "Filed into a digest"
    SENT = "sent", "A try was made at the provider"
    DELIVERED = "delivered", "Handed to the provider or the feed"
    REACHED = "reached", "The provider handed it to the person"
    FAILED = "failed", "Ended failed, dead or expired (with the reason)"
    BOUNCED = "bounced", "The provider reported a hard bounce"
    COMPLAINED = "complained", "The person marked it as spam"
    OPENED = "opened", "The provider reported it opened"
    CLICKED = "clicked", "The provider reported a link clicked"
    UNSUBSCRIBED = "unsubscribed", "The person unsubscribed from its category"
    READ = "read", "Read in the in-app feed"


class AnalyticsEvent(models.Model):
    """One event on its way to the store: append-only, no foreign keys (the rows it names
    are partitioned and archived), no index beyond the key (each write pays for them).

    `person` is a keyed hash of the user id (`analytics.events.person_hash`), never the
    id itself; `latency_ms` is accepted → handed to the provider on `delivered`, handed
    over → reached on `reached`. A `delivered` row also stands for its try's `sent`: the
    shipper writes both into the store, as event ids 2 * id + 1 and 2 * id. Likewise an
    `accepted` row written by the route may stand for a second delivery of the same
    notification (`pair_…`): event 2 * id in the store."""

    id = models.BigAutoField(primary_key=True)
    kind = models.CharField(max_length=16, choices=EventKind.choices)
    occurred_at = models.DateTimeField()
    producer_id = models.BigIntegerField()
    campaign_id = models.BigIntegerField(null=True)
    category = models.CharField(max_length=100)
    channel = models.CharField(max_length=10)
    provider = models.CharField(max_length=40)
    reason = models.CharField(max_length=32)
    delivery_id = models.BigIntegerField(null=True)
    notification_id = models.UUIDField(null=True)
    person = models.CharField(max_length=32)
    latency_ms = models.BigIntegerField(null=True)
    pair_delivery_id = models.BigIntegerField(null=True)
    pair_channel = models.CharField(max_length=10, blank=True, db_default="")
    pair_provider = models.CharField(max_length=40, blank=True, db_default="")

    def __str__(self) -> str:
        return f"{self.kind} #{self.pk}"


class AnalyticsErasure(models.Model):
    """A person erased: the shipper deletes their rows from the store, then this row."""

    person = models.CharField(max_length=32)
    requested_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"erasure of {self.person}"


class DeliveryReports(models.Model):
    """No table: the admin's delivery-analytics chart pages hang on it, and its one
    permission (`analytics.see_reports`, granted to no one by default) opens them. Not
    named `view_…`: the support role takes every `view_` permission of our apps."""

    class Meta:
        managed = False
        default_permissions = ()
        permissions = [("see_reports", "Can see the delivery analytics charts")]
        verbose_name = "delivery report"
        verbose_name_plural = "delivery reports"

    def __str__(self) -> str:
        return "delivery reports"
