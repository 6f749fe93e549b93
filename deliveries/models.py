"""Deliveries: one row per (notification, channel, target), and one attempt row per try.

The delivery row is the write-ahead record of the pipeline: its status,
`next_attempt_at` and `deadline` say what must happen next even if every message
about it is lost.
"""

from __future__ import annotations

from django.db import models
from django.db.models import F, Q

from deliveries.statuses import (  # noqa: F401 (the rest of the app imports them here)
    CLAIMABLE_STATUSES,
    FINAL_STATUSES,
    DeliveryStatus,
    Reason,
)
from notify.models import Channel
from notify.month_key import InNotificationMonth


class Delivery(InNotificationMonth):
    # No index of its own: the unique (notification, channel, target, month) leads with
    # it, and every row written or updated pays for each index.
    notification = models.ForeignKey(
        "notify.Notification",
        on_delete=models.CASCADE,
        db_constraint=False,
        db_index=False,
        related_name="deliveries",
    )
    channel = models.CharField(max_length=10, choices=Channel.choices)
    target = models.CharField(
        max_length=255, help_text="Email address, phone, device id, or the feed."
    )
    queue = models.CharField(max_length=10)
    status = models.CharField(
        max_length=16, choices=DeliveryStatus.choices, default=DeliveryStatus.QUEUED
    )
    reason = models.CharField(max_length=32, choices=Reason.choices, blank=True)
    attempts = models.PositiveIntegerField(default=0)
    next_attempt_at = models.DateTimeField(null=True, blank=True)
    deadline = models.DateTimeField(null=True, blank=True)
    claimed_at = models.DateTimeField(null=True, blank=True)
    enqueued_at = models.DateTimeField(
        null=True, blank=True, help_text="When a send message was last published for it."
    )
    template_version = models.ForeignKey(
        "templates_admin.TemplateVersion",
        on_delete=models.PROTECT,
        null=True,
        blank=True,
        related_name="deliveries",
    )
    # Its one index is in Meta.indexes.
    provider_message_id = models.CharField(
        max_length=255, blank=True, help_text="Receipts (SMS DLRs) find it by this."
    )
    attempt_budget_from = models.PositiveIntegerField(
        default=0, help_text="Attempts made before the last re-drive; the budget counts after."
    )
    pinned_provider = models.CharField(
        max_length=32,
        blank=True,
        default="",
        db_default="",
        help_text="A provider whose call ended without a clear answer (it may have taken the "
        "message): later tries go there only, unless the category puts speed first.",
    )
    gate_seal = models.CharField(
        max_length=64, blank=True, help_text="Written by the gate; the sender refuses without it."
    )
    last_error = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    # Copied from the notification when routed, so the sender's order check (an earlier
    # delivery to the same person on this channel still on its way) is one index probe.
    recipient = models.ForeignKey(
        "notify.Recipient",
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        db_index=False,
        related_name="+",
    )
    occurred_at = models.DateTimeField(null=True, blank=True)
    # The notification's created_at: the month the table is partitioned by, so a
    # notification and all its deliveries live (and are archived) in one month.
    accepted_at = models.DateTimeField()
    held_since = models.DateTimeField(
        null=True, blank=True, help_text="First held back for an earlier delivery; see attempts."
    )
    # What the metrics rollup (DeliveryCount) last counted this delivery as: its status
    # ("" = not counted yet) and attempts. Only deliveries.counts writes them.
    counted_status = models.CharField(max_length=16, default="", db_default="", editable=False)
    counted_attempts = models.IntegerField(default=0, db_default=0, editable=False)
    # How many times the sweeper gave back a claim whose sender was lost; once more than
    # NOTIFY_CLAIM_RECOVERIES_MAX, the delivery ends dead. A re-drive starts it again.
    claim_recoveries = models.IntegerField(default=0, db_default=0, editable=False)
    # The last sequence number given to a status webhook event about this delivery:
    # raised in the statement that writes the events (webhooks/events.py).
    webhook_sequence = models.IntegerField(default=0, db_default=0, editable=False)

    class Meta:
        verbose_name_plural = "deliveries"
        constraints = [
            models.UniqueConstraint(
                fields=["notification", "channel", "target", "accepted_at"],
                name="uniq_delivery_target",
            )
        ]
        indexes = [
            models.Index(
                fields=["next_attempt_at"],
                name="delivery_retry_due",
                condition=Q(status="retrying"),
            ),
            models.Index(
                fields=["claimed_at"], name="delivery_claimed", condition=Q(status="sending")
            ),
            # /metrics reads recent successful rows (accepted by the provider, or since
            # reported handed to the person) for the latency histogram.
            models.Index(
                fields=["finished_at"],
                name="delivery_success_recent",
                condition=Q(status__in=["delivered", "reached"]),
            ),
            # The order check: an earlier one to the same person and channel on its way
            # (deliveries/pipeline/ordering.py ON_ITS_WAY_SQL says which).
            models.Index(
                fields=["recipient", "channel", "occurred_at", "accepted_at", "notification"],
                name="delivery_order_pending",
                condition=Q(status__in=["queued", "sending"]) | Q(status="retrying", attempts=0),
            ),
            # Changed since the metrics rollup last counted them: what the fold takes and a
            # scrape adds on top of the rollup (deliveries.counts PENDING says the same).
            models.Index(
                fields=["channel"],
                name="delivery_count_pending",
                condition=~Q(status=F("counted_status")) | ~Q(attempts=F("counted_attempts")),
            ),
            # Provider events and receipts find a delivery by its provider message id:
            # equal to it, or (a part of a long SMS) starting with it. One pattern-ops
            # B-tree serves both; `db_index` made a plain B-tree beside it as well, an
            # index entry more for every row version written.
            models.Index(
                fields=["provider_message_id"],
                name="delivery_provider_message_id",
                opclasses=["varchar_pattern_ops"],
            ),
        ]

    def __str__(self) -> str:
        return f"{self.channel}→{self.target} ({self.status})"

    def month_key_fill(self) -> None:
        self.accepted_at = self.notification.created_at


class AttemptOutcome(models.TextChoices):
    DELIVERED = "delivered", "Delivered"
    TRANSIENT = "transient", "Transient failure"
    PERMANENT = "permanent", "Permanent failure"


class DeliveryAttempt(InNotificationMonth):
    """One try at the provider: when, how long, and what it answered."""

    # No index of its own: the unique (delivery, number, month) leads with it.
    delivery = models.ForeignKey(
        Delivery,
        on_delete=models.CASCADE,
        db_constraint=False,
        db_index=False,
        related_name="attempt_log",
    )
    number = models.PositiveIntegerField()
    # The delivery's accepted_at (its notification's created_at): the partition month.
    accepted_at = models.DateTimeField()
    started_at = models.DateTimeField()
    duration_ms = models.PositiveIntegerField()
    outcome = models.CharField(max_length=10, choices=AttemptOutcome.choices)
    status_code = models.CharField(max_length=32, blank=True)
    response = models.TextField(blank=True)
    provider_message_id = models.CharField(
        max_length=255,
        blank=True,
        default="",
        db_default="",
        help_text="The provider's id of the message this try sent (its events name it).",
    )
    provider = models.CharField(
        max_length=32,
        blank=True,
        default="",
        db_default="",
        help_text="The provider this try went to (one channel may fail over between several).",
    )
    held_ms = models.PositiveIntegerField(
        default=0,
        help_text="How long it was held back for an earlier delivery to the same person on "
        "this channel (NOTIFY_ORDER_WAIT_MAX bounds it).",
    )

    class Meta:
        ordering = ["delivery", "number"]
        constraints = [
            models.UniqueConstraint(
                fields=["delivery", "number", "accepted_at"], name="uniq_attempt_number"
            )
        ]

    def __str__(self) -> str:
        return f"attempt {self.number} of delivery {self.delivery_id}: {self.outcome}"

    def month_key_fill(self) -> None:
        self.accepted_at = self.delivery.accepted_at


class DeliveryRedrive(models.Model):
    """Who re-drove a dead (or failed) delivery, when, and from what state."""

    delivery = models.ForeignKey(
        Delivery, on_delete=models.CASCADE, db_constraint=False, related_name="redrives"
    )
    by = models.ForeignKey("auth.User", on_delete=models.SET_NULL, null=True, related_name="+")
    at = models.DateTimeField(auto_now_add=True)
    previous_status = models.CharField(max_length=16)
    previous_reason = models.CharField(max_length=32, blank=True)
    previous_attempts = models.PositiveIntegerField()

    class Meta:
        ordering = ["-at"]
        permissions = [("redrive_delivery", "Can re-drive dead deliveries")]

    def __str__(self) -> str:
        return f"re-drive of delivery {self.delivery_id} at {self.at:%Y-%m-%d %H:%M}"


class AddressSuppression(models.Model):
    """An address that bounced hard on a channel: later deliveries to it are not tried.

    The address is the key, so a recipient who changes theirs is reached again; support
    lifts an entry by deleting it in admin. Email addresses are stored lower-cased.
    """

    channel = models.CharField(max_length=10, choices=Channel.choices)
    address = models.CharField(max_length=255)
    evidence = models.TextField(help_text="The provider's answer that suppressed it.")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["channel", "address"], name="uniq_suppressed_address")
        ]

    def __str__(self) -> str:
        return f"{self.channel} {self.address}"


class DeadLetter(models.Model):
    """A message RabbitMQ dead-lettered, drained from the `dead_letter` queue into a row.

    One row per thing that failed (a route or send by its notification or delivery, any
    other message by its Celery task id): a message dead-lettered again after a re-drive
    or a sweeper's republish updates its row (count, last seen) and opens it again. The message
    is kept as it was published (body, headers, properties), so a re-drive publishes the
    same task again; the queue itself stays empty.
    """

    message_id = models.CharField(
        max_length=255,
        unique=True,
        help_text="What failed: the task and its notification or delivery id for a route "
        "or send, else the Celery task id (else a hash of the body).",
    )
    task = models.CharField(max_length=255, blank=True)
    arguments = models.JSONField(default=dict, help_text="The task's args and kwargs.")
    reason = models.CharField(
        max_length=32, help_text="RabbitMQ's: rejected, expired, maxlen or delivery_limit."
    )
    queue = models.CharField(max_length=255, help_text="The queue it died in.")
    exchange = models.CharField(max_length=255, blank=True)
    routing_key = models.CharField(max_length=255)
    death_headers = models.JSONField(default=list, help_text="The x-death header, as received.")
    headers = models.JSONField(default=dict, help_text="Its own headers, republished as is.")
    body = models.TextField()
    content_type = models.CharField(max_length=100)
    content_encoding = models.CharField(max_length=50)
    priority = models.PositiveSmallIntegerField(null=True, blank=True)
    count = models.PositiveIntegerField(default=1, help_text="Times it reached dead_letter.")
    first_seen_at = models.DateTimeField()
    last_seen_at = models.DateTimeField()
    redriven_at = models.DateTimeField(null=True, blank=True)
    redriven_by = models.ForeignKey(
        "auth.User", on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )

    class Meta:
        ordering = ["-last_seen_at"]
        indexes = [
            # /metrics counts the open ones at every scrape.
            models.Index(
                fields=["last_seen_at"],
                name="dead_letter_open",
                condition=Q(redriven_at__isnull=True),
            )
        ]

    def __str__(self) -> str:
        return f"{self.task or 'message'} {self.message_id} ({self.reason})"


class TemplateTestSend(models.Model):
    """The marker of a staff member's "Send test to me": its notification skipped the gate
    (no preferences, quiet hours or daily cap) under a test seal, for this version."""

    notification = models.OneToOneField(
        "notify.Notification",
        on_delete=models.CASCADE,
        db_constraint=False,
        related_name="template_test_send",
    )
    version = models.ForeignKey(
        "templates_admin.TemplateVersion", on_delete=models.CASCADE, related_name="+"
    )
    requested_by = models.ForeignKey(
        "auth.User", on_delete=models.SET_NULL, null=True, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"test send of {self.version_id} by {self.requested_by_id}"


class DeliveryCount(models.Model):
    """The metrics rollup: how many deliveries are (or ended) in each status, per channel
    and tries (0 never tried, 1 tried once, 2 more than once).

    Written only by deliveries.counts, which folds in each delivery's moves from the
    status it was counted in to the one it has now. Rows stay when deliveries are
    erased or dropped by retention: they hold numbers, no personal data.
    """

    channel = models.CharField(max_length=10, choices=Channel.choices)
    status = models.CharField(max_length=16, choices=DeliveryStatus.choices)
    tries = models.PositiveSmallIntegerField()
    count = models.BigIntegerField(default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["channel", "status", "tries"], name="uniq_delivery_count"
            )
        ]

    def __str__(self) -> str:
        return f"{self.channel} {self.status} tries={self.tries}: {self.count}"


# The app's other models, in modules of their own; imported here so the app's code reads
# every model from deliveries.models.
from deliveries.bounce_models import BounceMail, BounceOutcome  # noqa: E402, F401
from deliveries.device_models import Device, DeviceKind  # noqa: E402, F401
from deliveries.digest_models import DigestItem, DigestWindow, DigestWindowState  # noqa: E402, F401
from deliveries.provider_event_models import (  # noqa: E402, F401
    EarlyProviderEvent,
    ProviderEvent,
    ProviderEventKind,
)
