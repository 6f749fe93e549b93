"""Support's view of push devices and other secrets: which browser or app, never what
would let someone push to it or sign as us.

A device's endpoint URL, keys (p256dh, auth) and FCM token, and a status webhook's
signing secret, are shown only as a fingerprint: the first hex characters of their
SHA-256, enough to tell two apart and to match one a producer reads out, useless to
push or sign with. The change form does not carry them at all, so it can neither show
nor change them. Registered by deliveries/admin.py.
"""

from __future__ import annotations

import hashlib
from urllib.parse import urlsplit

from django.contrib import admin

from deliveries.models import Device

# Hex characters of the SHA-256 shown: a person's devices differ in them, and they say
# nothing usable about the value.
FINGERPRINT_LENGTH = 8
# What the form never carries: the secrets a fingerprint stands for.
DEVICE_SECRET_FIELDS = ("endpoint", "p256dh", "auth", "token")


def fingerprint(value: str) -> str:
    """The first FINGERPRINT_LENGTH hex characters of the SHA-256 of `value`; "-" when
    there is none (a removed device's address is forgotten)."""
    if not value:
        return "-"
    return hashlib.sha256(value.encode()).hexdigest()[:FINGERPRINT_LENGTH]


def device_address_fingerprint(device: Device) -> str:
    """The fingerprint of the device's address: its Web Push endpoint or FCM token."""
    return fingerprint(device.endpoint or device.token)


def push_service_host(device: Device) -> str:
    """The push service a Web Push endpoint belongs to (its host: which browser's), "-"
    for FCM. The host is the service's, not the person's: the path is what is secret."""
    return urlsplit(device.endpoint).netloc or "-"


class DeviceAdmin(admin.ModelAdmin):
    """Devices: support sees and may deactivate one; its secrets show as fingerprints."""

    list_display = (
        "id",
        "recipient",
        "kind",
        "platform",
        "push_service",
        "address_fingerprint",
        "active",
        "deactivated_reason",
        "registered_at",
    )
    list_filter = ("kind", "active", "deactivated_reason")
    search_fields = ("=recipient__user_id", "=id")
    list_select_related = ("recipient",)
    exclude = DEVICE_SECRET_FIELDS
    readonly_fields = (
        "recipient",
        "kind",
        "push_service",
        "address_fingerprint",
        "keys_fingerprint",
        "registered_at",
        "created_at",
        "updated_at",
    )

    def has_add_permission(self, request) -> bool:
        return False  # browsers and apps register themselves, through the API

    @admin.display(description="Endpoint / token fingerprint")
    def address_fingerprint(self, device: Device) -> str:
        return device_address_fingerprint(device)

    @admin.display(description="Keys fingerprint (p256dh, auth)")
    def keys_fingerprint(self, device: Device) -> str:
        if not (device.p256dh or device.auth):
            return "-"
        return fingerprint(f"{device.p256dh}.{device.auth}")

    @admin.display(description="Push service")
    def push_service(self, device: Device) -> str:
        return push_service_host(device)
