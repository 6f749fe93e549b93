"""Producers (the teams that send events), their API keys and the scopes a key may hold
(models of the notify app, kept in a module of their own; notify.models re-exports them)."""

from __future__ import annotations

from django.db import models


class Scope(models.TextChoices):
    """What an API key may do. A key holds exactly the scopes it lists: one made without
    any named gets DEFAULT_SCOPES (send, and read what its own producer sent)."""

    NOTIFICATIONS_SEND = "notifications:send", "Send, cancel and launch (per category)"
    RECIPIENTS_WRITE = "recipients:write", "Create and change recipients' contact data"
    USERS_READ = "users:read", "Read feeds, unread counts, streams, statuses, preferences"
    USERS_TOKENS = "users:tokens", "Issue end-user tokens"
    PREFERENCES_WRITE = "preferences:write", "Change preferences and consent"
    DEVICES_WRITE = "devices:write", "Register and remove push devices"
    USERS_ERASE = "users:erase", "Erase a person's data on request"
    WEBHOOKS_WRITE = "webhooks:write", "Register and manage status webhook endpoints"
    CATEGORIES_READ = "categories:read", "Read categories and their digest settings"
    CATEGORIES_WRITE = "categories:write", "Change its producer's categories' digest settings"
    CAMPAIGNS_WRITE = "campaigns:write", "Launch, pause, resume, cancel and read campaigns"


# Least privilege: what a key made without named scopes may do.
DEFAULT_SCOPES = (Scope.NOTIFICATIONS_SEND.value,)
# Powers that reach every person or every team: a key holding one of them beside every
# other scope is worth a warning (`manage.py check --deploy`).
DANGEROUS_SCOPES = (Scope.USERS_ERASE.value, Scope.CATEGORIES_WRITE.value)


class Producer(models.Model):
    """A product team (or service) that sends events."""

    name = models.CharField(max_length=100, unique=True)
    created_at = models.DateTimeField(auto_now_add=True)
    # Quotas in events, shared by all the producer's keys (notify.quotas); empty = the
    # settings' default (NOTIFY_PRODUCER_EVENTS_PER_MINUTE, …), and with none there, none.
    events_per_minute = models.PositiveIntegerField(
        null=True, blank=True, help_text="Events accepted per minute; empty = the default."
    )
    events_per_day = models.PositiveIntegerField(
        null=True, blank=True, help_text="Events accepted per day (UTC); empty = the default."
    )
    campaign_events_per_day = models.PositiveIntegerField(
        null=True,
        blank=True,
        help_text="Campaign recipients launched per day (UTC); empty = the default.",
    )

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
        help_text="Scope values (see Scope) this key may use, and nothing else.",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"{self.producer.name} {self.prefix}…"

    @property
    def is_active(self) -> bool:
        return self.revoked_at is None

    def has_scope(self, scope: str) -> bool:
        """True when the key lists `scope`."""
        return scope in (self.scopes or ())
