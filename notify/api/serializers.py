"""Request and response shapes of the public API (DESIGN.md section 12)."""

from __future__ import annotations

import re
import zoneinfo
from datetime import datetime, timedelta

from django.conf import settings
from django.utils import timezone
from rest_framework import serializers

from notify.models import Channel

_PHONE = re.compile(r"^\+[1-9]\d{6,14}$")
_LOCALE = re.compile(r"^[A-Za-z]{2,3}([-_][A-Za-z0-9]{2,8})*$")
# Ids are PostgreSQL bigints: a larger number is no id (and would fail in the database).
_BIGINT_MAX = 2**63 - 1


class NotificationIn(serializers.Serializer):
    event_id = serializers.CharField(max_length=200)
    user_id = serializers.CharField(max_length=255)
    category = serializers.CharField(max_length=100)
    payload = serializers.DictField(default=dict)
    channels = serializers.ListField(
        child=serializers.ChoiceField(choices=Channel.choices),
        required=False,
        allow_empty=False,
        max_length=len(Channel.choices),
    )
    ttl_seconds = serializers.IntegerField(min_value=1, max_value=28 * 24 * 3600, required=False)
    send_at = serializers.DateTimeField(
        required=False,
        help_text="Schedule it: routed (through the gate) at this time, not before. At most "
        "NOTIFY_SEND_AT_MAX_DAYS ahead; a time in the past means now.",
    )

    def validate_send_at(self, value: datetime) -> datetime:
        if value > timezone.now() + timedelta(days=settings.NOTIFY_SEND_AT_MAX_DAYS):
            raise serializers.ValidationError(
                f"At most {settings.NOTIFY_SEND_AT_MAX_DAYS} days ahead."
            )
        return value


class NotificationAcceptedOut(serializers.Serializer):
    notification_id = serializers.UUIDField()


class NotificationBatchIn(serializers.Serializer):
    # Each event is validated on its own (one answer per event), not here.
    events = serializers.ListField(
        child=serializers.JSONField(),
        allow_empty=False,
        max_length=settings.NOTIFY_BATCH_MAX_EVENTS,
    )


class ErrorOut(serializers.Serializer):
    code = serializers.CharField()
    message = serializers.CharField()
    field = serializers.CharField(required=False)


class NotificationBatchItemOut(serializers.Serializer):
    status = serializers.IntegerField(help_text="202, 400, 403, 409 or 422")
    notification_id = serializers.UUIDField(required=False)
    error = ErrorOut(required=False)


class NotificationBatchOut(serializers.Serializer):
    results = NotificationBatchItemOut(many=True)


class DeliveryStatusOut(serializers.Serializer):
    channel = serializers.CharField()
    target = serializers.CharField()
    status = serializers.CharField()
    reason = serializers.CharField()
    attempts = serializers.IntegerField()
    last_error = serializers.CharField()
    template_version = serializers.IntegerField(allow_null=True)
    next_attempt_at = serializers.DateTimeField(allow_null=True)
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()


class NotificationStatusOut(serializers.Serializer):
    notification_id = serializers.UUIDField()
    category = serializers.CharField()
    created_at = serializers.DateTimeField()
    send_at = serializers.DateTimeField(allow_null=True)
    cancelled_at = serializers.DateTimeField(allow_null=True)
    deliveries = DeliveryStatusOut(many=True)


class RecipientIn(serializers.Serializer):
    email = serializers.EmailField(required=False, allow_blank=True)
    phone = serializers.CharField(required=False, allow_blank=True, max_length=32)
    locale = serializers.CharField(required=False, allow_blank=True, max_length=35)
    timezone = serializers.CharField(required=False, max_length=64)

    def validate_phone(self, value: str) -> str:
        if value and not _PHONE.match(value):
            raise serializers.ValidationError("Use E.164 format, e.g. +14155550123.")
        return value

    def validate_locale(self, value: str) -> str:
        if value and not _LOCALE.match(value):
            raise serializers.ValidationError("Use a language tag such as 'en' or 'ru-RU'.")
        return value.replace("_", "-")

    def validate_timezone(self, value: str) -> str:
        try:
            zoneinfo.ZoneInfo(value)
        except (zoneinfo.ZoneInfoNotFoundError, ValueError):
            raise serializers.ValidationError(
                "Unknown time zone; use an IANA name such as 'Europe/Berlin'."
            ) from None
        return value


class RecipientOut(serializers.Serializer):
    user_id = serializers.CharField()
    email = serializers.CharField()
    phone = serializers.CharField()
    locale = serializers.CharField()
    timezone = serializers.CharField()
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()


class FeedEntryOut(serializers.Serializer):
    id = serializers.IntegerField()
    notification_id = serializers.UUIDField()
    category = serializers.CharField()
    title = serializers.CharField()
    body = serializers.CharField()
    url = serializers.CharField()
    created_at = serializers.DateTimeField()
    read_at = serializers.DateTimeField(allow_null=True)


class FeedPageOut(serializers.Serializer):
    results = FeedEntryOut(many=True)
    next_cursor = serializers.CharField(allow_null=True)


class FeedReadIn(serializers.Serializer):
    ids = serializers.ListField(
        child=serializers.IntegerField(min_value=1, max_value=_BIGINT_MAX),
        required=False,
        max_length=settings.NOTIFY_API_MAX_LIST_ITEMS,
    )
    all = serializers.BooleanField(required=False, default=False)

    def validate(self, attrs):
        if not attrs.get("all") and not attrs.get("ids"):
            raise serializers.ValidationError({"ids": "Give the entry ids, or all: true."})
        return attrs


class FeedReadOut(serializers.Serializer):
    marked = serializers.IntegerField()


class UnreadCountOut(serializers.Serializer):
    count = serializers.IntegerField(allow_null=True)
    available = serializers.BooleanField(required=False)
