"""Core domain data: producers and their keys, categories, recipients, notifications,
the outbox and the in-app feed. Rules live in services.py and selectors.py."""

from __future__ import annotations

import uuid
from collections.abc import Callable

from django.conf import settings
from django.contrib.postgres.indexes import BrinIndex
from django.core.exceptions import ValidationError
from django.db import models, transaction
from django.db.models import Q
from django.db.models.functions import Now

from notify.category_labels import validate_category_labels
from notify.deadlines import channel_deadline
from notify.producer_models import DANGEROUS_SCOPES, DEFAULT_SCOPES, ApiKey, Producer, Scope

__all__ = ["DANGEROUS_SCOPES", "DEFAULT_SCOPES", "ApiKey", "Producer", "Scope"]


class Channel(models.TextChoices):
    INAPP = "inapp", "In-app feed"
    EMAIL = "email", "Email"
    WEBPUSH = "webpush", "Web Push"
    FCM = "fcm", "FCM mobile push"
    SMS = "sms", "SMS"


# The channels that push to a device (a delivery's target is the device's id).
PUSH_CHANNELS = frozenset({Channel.WEBPUSH, Channel.FCM})


class QueueClass(models.TextChoices):
    HIGH = "high", "High (security, one-time codes)"
    MEDIUM = "medium", "Medium (transactional)"
    LOW = "low", "Low (marketing, campaigns)"


MARKETING_QUEUE_MESSAGE = (
    "A marketing category rides the low queue: choose Low, or untick Marketing."
)


def channel_seconds_problems(
    value: object,
    *,
    what: str,
    mandatory: bool,
    inapp: bool = False,
    most: Callable[[str], int] | None = None,
) -> list[str]:
    """What is wrong with a {channel: seconds} setting of a category (empty: nothing).
    Mandatory categories (login codes, payments) may be neither digested nor delayed:
    they go at once, every time. `inapp`: whether the setting applies to in-app (a
    digest may: one entry per window; a delay may not: it waits for that entry).
    `most(channel)`: the largest value the channel allows (a window at most a day, a
    delay short of the channel's deadline), so no stored value is too large to compute
    with."""
    if value in (None, {}, ""):
        return []
    if not isinstance(value, dict):
        return [f'{what} is given per channel, e.g. {{"email": 1800}}.']
    if mandatory:
        return [f"a mandatory category goes at once on every channel: it cannot have {what}."]
    problems = []
    for channel, seconds in value.items():
        if channel not in Channel.values or (channel == Channel.INAPP and not inapp):
            usable = ", ".join(c for c in Channel.values if inapp or c != Channel.INAPP)
            problems.append(f"“{channel}”: {what} applies to {usable}.")
        elif isinstance(seconds, bool) or not isinstance(seconds, int) or seconds <= 0:
            problems.append(f"“{channel}”: {what} is a whole number of seconds above 0.")
        elif most is not None and seconds > most(channel):
            problems.append(
                f"“{channel}”: {what} is at most {most(channel)} seconds on this channel."
            )
    return problems


def digest_window_most(channel: str) -> int:
    """The longest digest window a channel may have (NOTIFY_DIGEST_WINDOW_MAX_SECONDS)."""
    return settings.NOTIFY_DIGEST_WINDOW_MAX_SECONDS


def delay_most(category_ttl: int | None) -> Callable[[str], int]:
    """The longest delay each channel may have for a category with this TTL: short of the
    channel's deadline, or the delayed delivery would be expired before it could go."""
    return lambda channel: channel_deadline(channel=channel, category_ttl=category_ttl).seconds - 1


class Category(models.Model):
    """A kind of event (`order.shipped`): its queue class, flags, payload schema and channels."""

    key = models.CharField(max_length=100, unique=True)
    description = models.CharField(max_length=300, blank=True)
    # What a person reads per language, {"ru": {"label": …, "description": …}}.
    labels = models.JSONField(default=dict, blank=True, validators=[validate_category_labels])
    owner = models.ForeignKey(
        Producer,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="owned_categories",
        help_text="The producer whose keys (with categories:write) may change its settings "
        "through the API; empty = none may (admin only).",
    )
    queue = models.CharField(max_length=10, choices=QueueClass.choices, default=QueueClass.MEDIUM)
    mandatory = models.BooleanField(
        default=False, help_text="Login codes, payments: ignores opt-outs, quiet hours, caps."
    )
    marketing = models.BooleanField(
        default=False, help_text="Needs consent; unsubscribe, quiet hours and caps apply."
    )
    speed_over_duplicate = models.BooleanField(
        default=False,
        help_text="When a provider's call ends without a clear answer (it may have taken the "
        "message), send through the channel's next provider at once: a rare duplicate is "
        "better than a late message (login codes). Off: never sent elsewhere then.",
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
        null=True,
        blank=True,
        help_text="How long this category's messages stay worth sending (seconds). Each "
        "channel uses the shorter of this and its own default deadline, so it can only "
        "shorten one; empty = every channel's default. A notification's own ttl_seconds "
        "replaces it.",
    )

    # Fewer, better notifications (docs/digests.md): a channel may gather a recipient's
    # events into one digest per window, or wait and go only if the in-app entry is unread.
    digest_windows = models.JSONField(
        default=dict,
        blank=True,
        help_text='Seconds per channel, e.g. {"email": 1800}: at most one notification on '
        "that channel per window and recipient, listing the window's events (in-app too: "
        "one entry per window instead of one per event).",
    )
    digest_key = models.CharField(
        max_length=100,
        blank=True,
        help_text="A payload field (e.g. thread_id) whose value splits digests: one window "
        "per value. Empty: one window per recipient and channel.",
    )
    delays_if_unread = models.JSONField(
        default=dict,
        blank=True,
        help_text='Seconds per channel, e.g. {"email": 900}: that channel waits, and goes '
        "only if the in-app entry is still unread then (else skipped_read).",
    )

    class Meta:
        verbose_name_plural = "categories"
        constraints = [
            # A campaign must never compete with login codes for the high queue's workers.
            models.CheckConstraint(
                condition=Q(marketing=False) | Q(queue="low"),
                name="category_marketing_rides_low",
                violation_error_message=MARKETING_QUEUE_MESSAGE,
            )
        ]

    def __str__(self) -> str:
        return self.key

    def clean(self) -> None:
        """Refuse a marketing category on any queue but `low`, on the queue field (the
        database constraint says the same, but not next to the field), and digest or delay
        settings that cannot work. The admin form and the category API both validate here."""
        super().clean()
        if self.marketing and self.queue != QueueClass.LOW:
            raise ValidationError({"queue": MARKETING_QUEUE_MESSAGE})
        problems = {
            "digest_windows": channel_seconds_problems(
                self.digest_windows,
                what="a digest window",
                mandatory=self.mandatory,
                inapp=True,
                most=digest_window_most,
            ),
            "delays_if_unread": channel_seconds_problems(
                self.delays_if_unread,
                what="a delay",
                mandatory=self.mandatory,
                most=delay_most(self.ttl_seconds),
            ),
        }
        # The cross-field rules read only settings of the right shape (the rest is refused above).
        windows = self.digest_windows if isinstance(self.digest_windows, dict) else {}
        delays = self.delays_if_unread if isinstance(self.delays_if_unread, dict) else {}
        if Channel.INAPP in windows and delays and not problems["delays_if_unread"]:
            problems["delays_if_unread"] = [
                "a delay waits for each event's in-app entry: not with in-app digested."
            ]
        both = set(windows) & set(delays)
        if both and not problems["delays_if_unread"]:
            problems["delays_if_unread"] = [
                f"{', '.join(sorted(both))}: a channel is either digested or delayed, not both."
            ]
        schema = self.payload_schema if isinstance(self.payload_schema, dict) else {}
        fields = schema.get("properties") or {}
        if self.digest_key and (not isinstance(fields, dict) or self.digest_key not in fields):
            problems["digest_key"] = [
                f"“{self.digest_key}” is not a field of this category's payload schema."
            ]
        problems = {field: found for field, found in problems.items() if found}
        if problems:
            raise ValidationError(problems)

    def digest_window_for(self, channel: str) -> int | None:
        """Seconds of this category's digest window on `channel`, or None (not digested).
        Mandatory categories never digest, whatever the field says."""
        if self.mandatory:
            return None
        seconds = (self.digest_windows or {}).get(channel)
        return int(seconds) if isinstance(seconds, int | float) and seconds > 0 else None

    def delay_if_unread_for(self, channel: str) -> int | None:
        """Seconds `channel` waits for the in-app entry to be read, or None (no delay)."""
        if self.mandatory or channel == Channel.INAPP:
            return None
        seconds = (self.delays_if_unread or {}).get(channel)
        return int(seconds) if isinstance(seconds, int | float) and seconds > 0 else None

    @property
    def sending_queue(self) -> str:
        """The queue class its notifications and deliveries ride: `low` for marketing,
        whatever `queue` says (a row changed past validation must not reach `high`)."""
        return QueueClass.LOW.value if self.marketing else self.queue

    @staticmethod
    def sending_queue_sql(alias: str) -> str:
        """`sending_queue` as an SQL expression over the category row aliased `alias`."""
        return f"(CASE WHEN {alias}.marketing THEN '{QueueClass.LOW.value}' ELSE {alias}.queue END)"


class Recipient(models.Model):
    """A person in the product, known by the product's own `user_id`."""

    user_id = models.CharField(max_length=255, unique=True)
    email = models.EmailField(max_length=254, blank=True)
    phone = models.CharField(max_length=32, blank=True)
    locale = models.CharField(max_length=35, blank=True)
    timezone = models.CharField(max_length=64, default="UTC")
    created_by = models.ForeignKey(
        Producer,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
        help_text="The producer that registered the person (recipient ownership, "
        "docs/producers.md).",
    )
    erasure_hold_since = models.DateTimeField(
        null=True,
        blank=True,
        help_text="Registered with a user id or address that was erased before: nothing is "
        "sent until the person gives fresh consent.",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        permissions = [("erase_recipient", "Can erase a person on request")]
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
    """One accepted event for one recipient. Unique per (producer, event_id): its EventKey
    holds that pair, because the table is partitioned by month of `created_at` and a unique
    index over partitions must include it (docs/history.md)."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    producer = models.ForeignKey(Producer, on_delete=models.PROTECT, related_name="+")
    event_id = models.CharField(max_length=200)
    # No index of its own: the recipient's timeline index (recipient, created_at) leads
    # with it, and every notification written pays for each index.
    recipient = models.ForeignKey(
        Recipient, on_delete=models.CASCADE, db_index=False, related_name="notifications"
    )
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
    created_at = models.DateTimeField(auto_now_add=True)
    routed_at = models.DateTimeField(null=True, blank=True)
    cancelled_at = models.DateTimeField(
        null=True, blank=True, help_text="The producer cancelled it; what was not sent is not."
    )
    # When the event happened, as the producer says (else when it was accepted): the
    # recipient's feed and each channel's sends follow this order.
    occurred_at = models.DateTimeField(db_default=Now())
    subject = models.CharField(
        max_length=200,
        blank=True,
        db_default="",
        help_text="What the event is about (order:A-1001): an older event is not sent on "
        "push, SMS or email once a newer one about it reached the person there.",
    )
    # Added to the metrics rollup (AcceptedCount) yet; only notify.counts writes it.
    counted = models.BooleanField(default=False, db_default=False, editable=False)

    class Meta:
        indexes = [
            # Ranges by time (the route sweep's window). BRIN, not a B-tree: on a
            # partition with no statistics yet the planner took a B-tree here for one
            # row's lookup, which the primary key (id, created_at) is for.
            BrinIndex(fields=["created_at"], name="notif_created_brin"),
            # Accepted since the rollup was last folded: what the fold takes and a scrape
            # adds on top of the rollup.
            models.Index(
                fields=["category"], name="notif_count_pending", condition=Q(counted=False)
            ),
            models.Index(fields=["recipient", "-created_at"], name="notif_recipient_time"),
            # The sender's order check: an earlier event of the person not routed yet.
            models.Index(
                fields=["recipient", "occurred_at"],
                name="notif_unrouted_order",
                condition=Q(routed_at__isnull=True),
            ),
            # The sender's stale check: a newer event about the same subject.
            models.Index(
                fields=["recipient", "subject"],
                name="notif_recipient_subject",
                condition=~Q(subject=""),
            ),
        ]

    def __str__(self) -> str:
        return f"{self.category_id}:{self.event_id}"

    def save(self, *args, **kwargs) -> None:
        """Saved through the ORM (tests, "send test to me"), a new notification claims its
        event key in the same transaction, as intake's statement does: a repeated event id
        raises IntegrityError here too."""
        adding = self._state.adding
        with transaction.atomic(using=kwargs.get("using")):
            super().save(*args, **kwargs)
            if adding:
                EventKey.objects.create(
                    notification=self, producer_id=self.producer_id, event_id=self.event_id
                )


from notify.erasure_models import Erasure, ErasureSuppression, ErasureVia, SuppressedKind  # noqa: E402, F401
from notify.event_key_models import EventKey  # noqa: E402
from notify.feed_models import FeedEntry  # noqa: E402, F401
from notify.guard_models import ContactChange, RecipientGrant  # noqa: E402, F401
from notify.outbox_models import AcceptedCount, Outbox  # noqa: E402, F401
