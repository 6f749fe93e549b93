"""Campaigns: one marketing event for an audience, fanned out into one notification per
recipient (`event_id = campaign:<id>:<user_id>`). Rules live in fanout.py, control.py
and selectors.py."""

from __future__ import annotations

import uuid

from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models

# Bounds of a requested send rate (messages a second): below one every ten seconds a
# campaign of any size outlives its emails' deadlines; no provider we send through takes
# more than ten thousand a second.
SEND_RATE_MIN = 0.1
SEND_RATE_MAX = 10_000.0


class CampaignStatus(models.TextChoices):
    SCHEDULED = "scheduled", "Scheduled"
    RUNNING = "running", "Running"
    PAUSED = "paused", "Paused"
    CANCELLED = "cancelled", "Cancelled"
    DONE = "done", "Done"


class AudienceKind(models.TextChoices):
    USER_IDS = "user_ids", "A list of user ids"
    UPLOAD = "upload", "An uploaded CSV of user ids"
    SEGMENT = "segment", "A segment of recipient fields"
    ALL = "all", "Everyone with marketing consent"


class Campaign(models.Model):
    """One event for many recipients, and how far its fan-out has come."""

    name = models.CharField(max_length=200)
    category = models.ForeignKey(
        "notify.Category",
        on_delete=models.PROTECT,
        related_name="+",
        limit_choices_to={"marketing": True},
    )
    payload = models.JSONField(default=dict)
    audience_kind = models.CharField(max_length=10, choices=AudienceKind.choices)
    audience_spec = models.JSONField(
        default=dict,
        blank=True,
        help_text='{"user_ids": [...]}, or a segment such as {"locale": ["de"], '
        '"has_email": true}; empty for everyone with consent.',
    )
    send_at = models.DateTimeField(null=True, blank=True, help_text="Empty: start at once.")
    # Pacing (campaigns/pacing.py): members are released to routing at this many a
    # second (at most the low class's share of the providers' buckets); empty: unpaced.
    send_rate = models.FloatField(
        null=True,
        blank=True,
        validators=[MinValueValidator(SEND_RATE_MIN), MaxValueValidator(SEND_RATE_MAX)],
        help_text="Messages per second; empty: as fast as providers allow.",
    )
    # Local-time delivery: each member at this wall-clock time in their own zone, the
    # next one within 24 h of the start (past their quiet hours); empty: at once.
    local_time = models.TimeField(
        null=True, blank=True, help_text="Deliver at this local time in each person's zone."
    )
    # When the paced release schedule starts (the first batch fixes it).
    paced_from = models.DateTimeField(null=True, blank=True, editable=False)
    # A local-time campaign with a rate: each moment members share, when its members'
    # turns start and how many took one (campaigns/pacing.py, `LocalSlots`).
    local_slots = models.JSONField(default=dict, blank=True, editable=False)
    status = models.CharField(
        max_length=10, choices=CampaignStatus.choices, default=CampaignStatus.SCHEDULED
    )
    producer = models.ForeignKey("notify.Producer", on_delete=models.PROTECT, related_name="+")
    launched_by = models.ForeignKey(
        "auth.User", on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    launched_at = models.DateTimeField(auto_now_add=True)
    # Fixed by the first batch: the audience is the matching recipients up to this id,
    # so people who sign up during a long fan-out do not stretch it.
    audience_until = models.BigIntegerField(null=True, blank=True, editable=False)
    audience_size = models.PositiveIntegerField(null=True, blank=True, editable=False)
    # An uploaded audience: distinct user ids in the file, and how many of them name
    # nobody (they are listed in admin, not fatal).
    uploaded_count = models.PositiveIntegerField(null=True, blank=True, editable=False)
    unknown_count = models.PositiveIntegerField(null=True, blank=True, editable=False)
    created_count = models.PositiveIntegerField(default=0, editable=False)
    checkpoint = models.BigIntegerField(
        default=0, editable=False, help_text="The last recipient id fanned out."
    )
    fanned_out_at = models.DateTimeField(null=True, blank=True, editable=False)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        permissions = [("launch_campaign", "Can launch campaigns")]
        indexes = [models.Index(fields=["status", "send_at"], name="campaign_status_due")]

    def __str__(self) -> str:
        return self.name

    @property
    def event_id_prefix(self) -> str:
        """Every notification of the campaign has an event id that starts so."""
        return f"campaign:{self.pk}:"


class CampaignMember(models.Model):
    """One user id of an uploaded audience, as uploaded: it may name nobody (yet)."""

    campaign = models.ForeignKey(Campaign, on_delete=models.CASCADE, related_name="+")
    user_id = models.CharField(max_length=255)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["campaign", "user_id"], name="uniq_campaign_member")
        ]

    def __str__(self) -> str:
        return f"{self.user_id} ({self.campaign_id})"


class StagedUpload(models.Model):
    """An audience file read and checked before launch: the launch page estimates over
    its rows, and a launch that names it takes exactly those rows (campaigns/upload.py).
    Its id is a random token, and only the staff member who staged it may use it."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    staged_by = models.ForeignKey("auth.User", on_delete=models.CASCADE, related_name="+")
    file_name = models.CharField(max_length=255, blank=True)
    uploaded_count = models.PositiveIntegerField()
    unknown_count = models.PositiveIntegerField()
    staged_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"{self.file_name} ({self.uploaded_count} user ids)"


class StagedMember(models.Model):
    """One distinct user id of a staged upload."""

    staged = models.ForeignKey(StagedUpload, on_delete=models.CASCADE, related_name="+")
    user_id = models.CharField(max_length=255)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["staged", "user_id"], name="uniq_staged_member")
        ]

    def __str__(self) -> str:
        return f"{self.user_id} (staged {self.staged_id})"


class CampaignHold(models.Model):
    """What a pause holds back, and the state to give it back on resume.

    `delivery` empty: a notification that was not routed yet (its route is held);
    otherwise a delivery that was not sent yet.
    """

    campaign = models.ForeignKey(Campaign, on_delete=models.CASCADE, related_name="holds")
    notification = models.ForeignKey(
        "notify.Notification", on_delete=models.CASCADE, db_constraint=False, related_name="+"
    )
    delivery = models.OneToOneField(
        "deliveries.Delivery",
        on_delete=models.CASCADE,
        null=True,
        db_constraint=False,
        related_name="+",
    )
    previous_status = models.CharField(max_length=16, blank=True)
    previous_reason = models.CharField(max_length=32, blank=True)
    previous_next_attempt_at = models.DateTimeField(null=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["notification"],
                condition=models.Q(delivery__isnull=True),
                name="uniq_campaign_hold_route",
            )
        ]

    def __str__(self) -> str:
        return f"hold of {self.delivery_id or self.notification_id} ({self.campaign_id})"


# A seed send goes out in the admin's request, one email after another: a list of
# colleagues, not an audience.
SEED_LIST_MAX_MEMBERS = 50


class SeedList(models.Model):
    """A named group of staff addresses that a template draft or a campaign not started yet
    is sent to as a test, before real recipients see it (campaigns.seeds)."""

    name = models.CharField(max_length=100, unique=True)
    addresses = models.JSONField(
        default=list, help_text=f"At most {SEED_LIST_MAX_MEMBERS} email addresses."
    )
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]
        permissions = [("send_to_seed_list", "Can send a draft or campaign to a seed list")]

    def __str__(self) -> str:
        return self.name
