"""Push devices: the browsers and app instances a person's push deliveries go to."""

from __future__ import annotations

from django.db import models
from django.db.models import Q
from django.utils import timezone


class DeviceKind(models.TextChoices):
    WEBPUSH = "webpush", "Web Push subscription"
    FCM = "fcm", "FCM registration token"


class Device(models.Model):
    """A browser or app instance that can receive push.

    Its id is its stable identity: push deliveries target it (a retry reaches the new
    endpoint), and re-registering the same browser/app updates the endpoint/token in
    place. `installation_id` is how a re-registration is recognised when the client sends
    one; otherwise the endpoint or token itself is the key.
    """

    recipient = models.ForeignKey(
        "notify.Recipient", on_delete=models.CASCADE, related_name="devices"
    )
    kind = models.CharField(max_length=10, choices=DeviceKind.choices)
    installation_id = models.CharField(
        max_length=255, blank=True, help_text="The client's own stable id for this browser/app."
    )
    endpoint = models.URLField(max_length=1024, blank=True, help_text="Web Push endpoint.")
    p256dh = models.CharField(max_length=255, blank=True)
    auth = models.CharField(max_length=255, blank=True)
    token = models.CharField(max_length=4096, blank=True, help_text="FCM registration token.")
    platform = models.CharField(max_length=20, blank=True)
    active = models.BooleanField(default=True)
    deactivated_reason = models.CharField(max_length=64, blank=True)
    # Only a registration writes it (not an admin edit, not a deactivation): the cap on
    # devices per person keeps the most recently registered ones.
    registered_at = models.DateTimeField(
        default=timezone.now, help_text="When its browser/app last registered it (or again)."
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["recipient", "kind", "installation_id"],
                name="uniq_device_installation",
                condition=~Q(installation_id=""),
            ),
            models.UniqueConstraint(
                fields=["kind", "endpoint"],
                name="uniq_device_endpoint",
                condition=~Q(endpoint=""),
            ),
        ]
        indexes = [models.Index(fields=["recipient", "kind", "active"], name="device_live")]

    def __str__(self) -> str:
        return f"{self.kind} device {self.pk} of {self.recipient_id}"
