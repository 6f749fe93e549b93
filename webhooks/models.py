"""Status webhooks out: producers' endpoints, what they subscribe to, the events written
for them and each try at posting one.

The tables keep the names they were created with (`deliveries_webhook…`), from when these
models lived in the deliveries app: moving them changed no table."""

from __future__ import annotations

from django.db import models
from django.db.models import Q


class WebhookEventType(models.TextChoices):
    """What a producer's endpoint can subscribe to."""

    DELIVERY_DELIVERED = "delivery.delivered", "A delivery was handed to its provider or feed"
    DELIVERY_FAILED = "delivery.failed", "A delivery ended failed, dead or expired"
    DELIVERY_SUPPRESSED = "delivery.suppressed", "A delivery was not sent (gate, bounce list)"
    NOTIFICATION_ROUTED = "notification.routed", "A notification passed the gate"
    DELIVERY_REACHED = "delivery.reached", "The provider handed a delivery to the person"
    DELIVERY_COMPLAINED = "delivery.complained", "The person marked an email as spam"
    DELIVERY_OPENED = "delivery.opened", "The provider reported an email opened"
    DELIVERY_CLICKED = "delivery.clicked", "The provider reported a link clicked"


class WebhookEndpoint(models.Model):
    """A producer's HTTPS endpoint that is told of its notifications' outcomes.

    Signed with `secret` (Standard Webhooks, `whsec_…`); after a rotation the previous
    secret signs too until `previous_secret_until`. `disabled_reason` says why an
    endpoint that kept failing was disabled.
    """

    producer = models.ForeignKey(
        "notify.Producer", on_delete=models.CASCADE, related_name="webhook_endpoints"
    )
    url = models.URLField(max_length=1024)
    description = models.CharField(max_length=200, blank=True)
    secret = models.CharField(max_length=100)
    previous_secret = models.CharField(max_length=100, blank=True)
    previous_secret_until = models.DateTimeField(null=True, blank=True)
    active = models.BooleanField(default=True)
    disabled_reason = models.TextField(blank=True)
    disabled_at = models.DateTimeField(null=True, blank=True)
    # Since when every post has failed (None: the last one succeeded), and how many in a row.
    failing_since = models.DateTimeField(null=True, blank=True)
    failures_in_row = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        db_table = "deliveries_webhookendpoint"
        ordering = ["pk"]

    def __str__(self) -> str:
        return self.url


class WebhookSubscription(models.Model):
    """One event type an endpoint wants; `producer` is copied for the event write's join."""

    endpoint = models.ForeignKey(
        WebhookEndpoint, on_delete=models.CASCADE, related_name="subscriptions"
    )
    producer = models.ForeignKey("notify.Producer", on_delete=models.CASCADE, related_name="+")
    event_type = models.CharField(max_length=40, choices=WebhookEventType.choices)

    class Meta:
        db_table = "deliveries_webhooksubscription"
        constraints = [
            models.UniqueConstraint(fields=["endpoint", "event_type"], name="uniq_webhook_sub")
        ]
        indexes = [models.Index(fields=["producer", "event_type"], name="webhook_sub_lookup")]

    def __str__(self) -> str:
        return self.event_type


class WebhookEventStatus(models.TextChoices):
    PENDING = "pending", "Pending"
    SENDING = "sending", "Sending"
    DELIVERED = "delivered", "Delivered"
    FAILED = "failed", "Failed (retries exhausted)"


class WebhookEvent(models.Model):
    """One event for one endpoint: the message posted (and re-posted) until it is taken.

    `msg_id` is the `webhook-id` the receiver deduplicates by; `payload` is the body.
    """

    endpoint = models.ForeignKey(WebhookEndpoint, on_delete=models.CASCADE, related_name="events")
    msg_id = models.CharField(max_length=64, unique=True)
    event_type = models.CharField(max_length=40, choices=WebhookEventType.choices)
    payload = models.JSONField()
    # Its order among the events about the same delivery (0: `notification.routed`, which
    # comes before them all); in the payload and the `webhook-sequence` header.
    sequence = models.IntegerField(default=0, db_default=0)
    # The notification it is about: a re-drive posts one notification's events in one
    # message, so they arrive in sequence.
    notification_id = models.UUIDField(null=True, blank=True)
    # Whose notification it is about, so erasure finds it (no foreign key: the history
    # tables are partitioned and archived, and an event outlives nothing it names).
    recipient_id = models.BigIntegerField(null=True, blank=True, db_index=True)
    status = models.CharField(
        max_length=10, choices=WebhookEventStatus.choices, default=WebhookEventStatus.PENDING
    )
    attempts = models.PositiveIntegerField(default=0)
    # Attempts made before the last re-delivery: the retry schedule counts after them.
    attempts_before_redrive = models.PositiveIntegerField(default=0, db_default=0)
    next_attempt_at = models.DateTimeField()
    claimed_at = models.DateTimeField(null=True, blank=True)
    enqueued_at = models.DateTimeField(null=True, blank=True)
    last_error = models.TextField(blank=True)
    created_at = models.DateTimeField()
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        db_table = "deliveries_webhookevent"
        indexes = [
            # The sweep: what is due.
            models.Index(
                fields=["next_attempt_at"],
                name="webhook_event_due",
                condition=Q(status__in=["pending", "sending"]),
            ),
            models.Index(fields=["endpoint", "status"], name="webhook_event_endpoint"),
            # A disabled endpoint's backlog, trimmed from its oldest.
            models.Index(
                fields=["endpoint", "id"],
                name="webhook_event_backlog",
                condition=Q(status="pending"),
            ),
            # Re-delivery of an endpoint's failed events by time.
            models.Index(
                fields=["endpoint", "created_at"],
                name="webhook_event_failed",
                condition=Q(status="failed"),
            ),
        ]

    def __str__(self) -> str:
        return f"{self.event_type} {self.msg_id}"


class WebhookAttempt(models.Model):
    """One post of an event: what the receiver answered, and how long it took."""

    event = models.ForeignKey(WebhookEvent, on_delete=models.CASCADE, related_name="tries")
    endpoint = models.ForeignKey(WebhookEndpoint, on_delete=models.CASCADE, related_name="attempts")
    number = models.PositiveIntegerField()
    started_at = models.DateTimeField()
    duration_ms = models.PositiveIntegerField()
    ok = models.BooleanField()
    status_code = models.CharField(max_length=32, blank=True)
    response = models.TextField(blank=True)

    class Meta:
        db_table = "deliveries_webhookattempt"
        indexes = [models.Index(fields=["endpoint", "-started_at"], name="webhook_attempt_recent")]

    def __str__(self) -> str:
        return f"#{self.number} {'ok' if self.ok else 'failed'} {self.status_code}"
