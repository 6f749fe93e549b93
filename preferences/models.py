"""Preferences, consent history, quiet hours and the daily marketing counter.

The current state (`Preference`) is written in the same transaction as the consent
record that explains it (`ConsentRecord`), so the history never disagrees with what
the gate reads. Rules live in services.py and selectors.py.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models

from notify.models import Category, Channel, Recipient


class ConsentSource(models.TextChoices):
    SIGNUP = "signup", "Signup"
    EMAIL_LINK = "email_link", "Email unsubscribe link"
    SUPPORT = "support", "Support"
    API = "api", "API"
    PREFERENCE_CENTER = "preference_center", "Preference center"
    # The person marked an email as spam (their email provider's complaint, relayed by ours).
    SPAM_COMPLAINT = "spam_complaint", "Spam complaint"
    # The person unsubscribed at our email provider (its own link or the mailbox's
    # one-click button on the provider's header), relayed by its webhook.
    ESP_UNSUBSCRIBE = "esp_unsubscribe", "Unsubscribed at the email provider"


class Preference(models.Model):
    """One cell of the preference matrix: may this category reach this recipient here?

    No row means the category default (on for its default channels). A row exists once
    the recipient (or someone on their behalf) changed the cell.
    """

    recipient = models.ForeignKey(Recipient, on_delete=models.CASCADE, related_name="preferences")
    category = models.ForeignKey(Category, on_delete=models.CASCADE, related_name="+")
    channel = models.CharField(max_length=10, choices=Channel.choices)
    enabled = models.BooleanField()
    source = models.CharField(
        max_length=20, choices=ConsentSource.choices, help_text="Who changed it last."
    )
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["recipient", "category", "channel"], name="uniq_preference_cell"
            )
        ]

    def __str__(self) -> str:
        state = "on" if self.enabled else "off"
        return f"{self.recipient_id} {self.category_id}/{self.channel}: {state}"


class ConsentRecord(models.Model):
    """Append-only: a grant or withdrawal, who made it, where, under which text.

    `category` empty means all marketing; `channel` empty means every channel. The app
    never deletes these rows. Erasure detaches them from the person: `recipient` empty,
    `user_hash` the keyed hash of their user id, the IP address and user agent cleared.
    Deleting a recipient any other way leaves them too (detached), never cascades.
    """

    recipient = models.ForeignKey(
        Recipient, on_delete=models.SET_NULL, null=True, blank=True, related_name="consents"
    )
    user_hash = models.CharField(
        max_length=64,
        blank=True,
        # In the table too: rows written by set-based SQL (seeds, imports) need not name it.
        db_default="",
        db_index=True,
        help_text="After erasure: the keyed hash of the person's user id, the record's only "
        "link to them.",
    )
    category = models.ForeignKey(
        Category, on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )
    channel = models.CharField(max_length=10, choices=Channel.choices, blank=True)
    granted = models.BooleanField()
    source = models.CharField(max_length=20, choices=ConsentSource.choices)
    text_version = models.CharField(max_length=50, blank=True)
    ip_address = models.GenericIPAddressField(null=True, blank=True)
    user_agent = models.CharField(max_length=500, blank=True)
    # Set for records support took down (by phone, by letter): who, and why. A deleted
    # staff account leaves the record in place with the agent empty.
    agent = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
        help_text="The support agent who recorded it.",
    )
    reason = models.TextField(
        blank=True, help_text="What the person asked for, in the agent's words."
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        indexes = [models.Index(fields=["recipient", "category", "-id"], name="consent_latest")]
        permissions = [
            ("record_consent_by_support", "Can record a consent or withdrawal taken by support")
        ]

    def __str__(self) -> str:
        verb = "granted" if self.granted else "withdrawn"
        scope = self.category_id or "all marketing"
        return f"{self.recipient_id} {scope}/{self.channel or '*'} {verb} via {self.source}"


class QuietHours(models.Model):
    """A recipient's own quiet window (local time); without a row the defaults apply."""

    recipient = models.OneToOneField(
        Recipient, on_delete=models.CASCADE, related_name="quiet_hours"
    )
    start = models.TimeField(help_text="Local time the window opens, e.g. 21:00.")
    end = models.TimeField(help_text="Local time it closes, e.g. 09:00 (may be next day).")

    class Meta:
        verbose_name_plural = "quiet hours"

    def __str__(self) -> str:
        return f"{self.recipient_id} {self.start:%H:%M}-{self.end:%H:%M}"


class MarketingDayCount(models.Model):
    """How many marketing notifications a recipient was sent on one local day."""

    recipient = models.ForeignKey(Recipient, on_delete=models.CASCADE, related_name="+")
    local_date = models.DateField()
    count = models.PositiveIntegerField(default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["recipient", "local_date"], name="uniq_marketing_day")
        ]

    def __str__(self) -> str:
        return f"{self.recipient_id} {self.local_date}: {self.count}"


class PreferenceCenterLinks(models.Model):
    """Revocation of a recipient's preference-center links: every link minted before
    `valid_after` is refused. No row: every unexpired link is good.

    A "not before" time rather than a list of revoked links or a counter carried in each
    link: minting a link (once per email sent) then reads nothing, and revoking covers
    every link ever sent, however many, with one row.
    """

    recipient = models.OneToOneField(
        Recipient, on_delete=models.CASCADE, related_name="preference_center_links"
    )
    valid_after = models.DateTimeField(help_text="Links minted before this are refused.")

    class Meta:
        verbose_name_plural = "preference center links"

    def __str__(self) -> str:
        return f"{self.recipient_id} links valid after {self.valid_after:%Y-%m-%d %H:%M:%S}"


class SettingChange(models.Model):
    """Append-only: a change of a recipient setting that is not a consent cell (quiet
    hours, time zone, language), where it came from and the new value. Removed with the
    recipient: it is not consent evidence and the values describe the person."""

    class Setting(models.TextChoices):
        QUIET_HOURS = "quiet_hours", "Quiet hours"
        TIMEZONE = "timezone", "Time zone"
        LOCALE = "locale", "Language"

    recipient = models.ForeignKey(
        Recipient, on_delete=models.CASCADE, related_name="setting_changes"
    )
    setting = models.CharField(max_length=20, choices=Setting.choices)
    value = models.CharField(max_length=64)
    source = models.CharField(max_length=20, choices=ConsentSource.choices)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        indexes = [models.Index(fields=["recipient", "-id"], name="setting_change_latest")]

    def __str__(self) -> str:
        return f"{self.recipient_id} {self.setting}={self.value} via {self.source}"
