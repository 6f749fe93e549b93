"""Core domain data: producers and their keys, categories, recipients, notifications,
the outbox and the in-app feed. Rules live in services.py and selectors.py."""

from __future__ import annotations

import uuid

from django.db import models
from django.db.models import Q
from django.utils import timezone


class Channel(models.TextChoices):
    INAPP = "inapp", "In-app feed"
    EMAIL = "email", "Email"
    WEBPUSH = "webpush", "Web Push"
    FCM = "fcm", "FCM mobile push"
    SMS = "sms", "SMS"


class QueueClass(models.TextChoices):
    HIGH = "high", "High (security, one-time codes)"
    MEDIUM = "medium", "Medium (transactional)"
    LOW = "low", "Low (marketing, campaigns)"


class Scope(models.TextChoices):
    """What an API key may do; a key with no scopes listed may do all (keys made before)."""

    NOTIFICATIONS_SEND = "notifications:send", "Send, cancel and launch (per category)"
    RECIPIENTS_WRITE = "recipients:write", "Create and change recipients' contact data"
    USERS_READ = "users:read", "Read feeds, unread counts, streams, statuses, preferences"
    USERS_TOKENS = "users:tokens", "Issue end-user tokens"
    PREFERENCES_WRITE = "preferences:write", "Change preferences and consent"
    DEVICES_WRITE = "devices:write", "Register and remove push devices"


class Producer(models.Model):
    """A product team (or service) that sends events."""

    name = models.CharField(max_length=100, unique=True)
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return self.name


class ApiKey(models.Model):
    """A producer's credential. Only a hash is stored; the key is shown once."""

    producer = models.ForeignKey(Producer, on_delete=models.CASCADE, related_name="api_keys")
    prefix = models.CharField(max_length=16, unique=True, help_text="Public part, for lookup.")
    key_hash = models.CharField(max_length=64)
    all_categories = models.BooleanField(
        default=False, help_text="May send every category, present and future."
    )
    categories = models.ManyToManyField("Category", blank=True, related_name="api_keys")
    rate_per_second = models.FloatField(
        null=True, blank=True, help_text="Overrides NOTIFY_API_RATE_PER_SECOND for this key."
    )
    rate_burst = models.PositiveIntegerField(
        null=True, blank=True, help_text="Overrides NOTIFY_API_RATE_BURST for this key."
    )
    scopes = models.JSONField(
        default=list,
        blank=True,
        help_text="Scope values (see Scope) this key may use; empty = all of them.",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"{self.producer.name} {self.prefix}…"

    @property
    def is_active(self) -> bool:
        return self.revoked_at is None

    def has_scope(self, scope: str) -> bool:
        """True when the key lists `scope`, or lists none (all scopes)."""
        return not self.scopes or scope in self.scopes


class Category(models.Model):
    """A kind of event (`order.shipped`): its queue class, flags, payload schema and channels."""

    key = models.CharField(max_length=100, unique=True)
    description = models.CharField(max_length=300, blank=True)
    queue = models.CharField(max_length=10, choices=QueueClass.choices, default=QueueClass.MEDIUM)
    mandatory = models.BooleanField(
        default=False, help_text="Login codes, payments: ignores opt-outs, quiet hours, caps."
    )
    marketing = models.BooleanField(
        default=False, help_text="Needs consent; unsubscribe, quiet hours and caps apply."
    )
    payload_schema = models.JSONField(default=dict, blank=True)
    sample_payloads = models.JSONField(
        default=list, blank=True, help_text="Example payloads for previews and validation."
    )
    default_channels = models.JSONField(default=list, blank=True)
    fallback_channel = models.CharField(
        max_length=10,
        choices=Channel.choices,
        blank=True,
        help_text="Tried through the gate when a delivery on an unreliable channel (SMS) "
        "ends dead.",
    )
    ttl_seconds = models.PositiveIntegerField(
        null=True, blank=True, help_text="How long a push stays useful; default when empty."
    )

    class Meta:
        verbose_name_plural = "categories"

    def __str__(self) -> str:
        return self.key


class Recipient(models.Model):
    """A person in the product, known by the product's own `user_id`."""

    user_id = models.CharField(max_length=255, unique=True)
    email = models.EmailField(max_length=254, blank=True)
    phone = models.CharField(max_length=32, blank=True)
    locale = models.CharField(max_length=35, blank=True)
    timezone = models.CharField(max_length=64, default="UTC")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        # Support searches by exact value or prefix (`LIKE 'x%'`), which needs the
        # pattern operator classes. The case-insensitive email index, on
        # lower(email) text_pattern_ops, is created in SQL by migration 0002.
        indexes = [
            models.Index(
                fields=["user_id"], opclasses=["varchar_pattern_ops"], name="recipient_uid_prefix"
            ),
            models.Index(
                fields=["phone"], opclasses=["varchar_pattern_ops"], name="recipient_phone_prefix"
            ),
        ]

    def __str__(self) -> str:
        return self.user_id


class Notification(models.Model):
    """One accepted event for one recipient. Unique per (producer, event_id)."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    producer = models.ForeignKey(Producer, on_delete=models.PROTECT, related_name="+")
    event_id = models.CharField(max_length=200)
    recipient = models.ForeignKey(Recipient, on_delete=models.CASCADE, related_name="notifications")
    category = models.ForeignKey(Category, on_delete=models.PROTECT, related_name="+")
    payload = models.JSONField(default=dict)
    channels = models.JSONField(
        null=True, blank=True, help_text="Channels the producer asked for; empty = defaults."
    )
    ttl_seconds = models.PositiveIntegerField(null=True, blank=True)
    send_at = models.DateTimeField(
        null=True, blank=True, help_text="Scheduled: not routed before this time."
    )
    fingerprint = models.CharField(
        max_length=64, help_text="Hash of the request body, to tell a retry from a conflict."
    )
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    routed_at = models.DateTimeField(null=True, blank=True)
    cancelled_at = models.DateTimeField(
        null=True, blank=True, help_text="The producer cancelled it; what was not sent is not."
    )

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["producer", "event_id"], name="uniq_producer_event")
        ]
        indexes = [models.Index(fields=["recipient", "-created_at"], name="notif_recipient_time")]

    def __str__(self) -> str:
        return f"{self.category_id}:{self.event_id}"


class Outbox(models.Model):
    """Written with the notification; marked published once the route task is confirmed."""

    notification = models.OneToOneField(
        Notification, on_delete=models.CASCADE, related_name="outbox"
    )
    queue = models.CharField(max_length=10, choices=QueueClass.choices)
    created_at = models.DateTimeField(auto_now_add=True)
    # When the relay may publish it: at once, or a scheduled notification's send_at. The
    # row is the durable record of the schedule (no broker-side delay to lose).
    due_at = models.DateTimeField(default=timezone.now)
    published_at = models.DateTimeField(null=True, blank=True)
    publish_attempts = models.PositiveIntegerField(default=0)

    class Meta:
        verbose_name_plural = "outbox"
        indexes = [
            # The relay reads each queue class's due rows in order.
            models.Index(
                fields=["queue", "due_at"],
                name="outbox_unpublished_class_due",
                condition=Q(published_at__isnull=True),
            )
        ]

    def __str__(self) -> str:
        state = "published" if self.published_at else "unpublished"
        return f"outbox {self.notification_id} ({state})"


class FeedEntry(models.Model):
    """An in-app notification in a recipient's feed."""

    recipient = models.ForeignKey(Recipient, on_delete=models.CASCADE, related_name="feed")
    notification = models.OneToOneField(
        Notification, on_delete=models.CASCADE, related_name="feed_entry"
    )
    category = models.CharField(max_length=100)
    title = models.CharField(max_length=500)
    body = models.TextField(blank=True)
    url = models.CharField(max_length=2000, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    read_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        verbose_name_plural = "feed entries"
        indexes = [
            models.Index(fields=["recipient", "-id"], name="feed_recipient_newest"),
            models.Index(
                fields=["recipient"],
                name="feed_recipient_unread",
                condition=Q(read_at__isnull=True),
            ),
        ]

    def __str__(self) -> str:
        return self.title
