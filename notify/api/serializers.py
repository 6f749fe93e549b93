"""Request and response shapes of the public API (DESIGN.md section 12)."""

from __future__ import annotations

import re
import zoneinfo
from collections.abc import Callable
from datetime import datetime, timedelta

from django.conf import settings
from django.core.validators import RegexValidator
from django.utils import timezone
from drf_spectacular.utils import extend_schema_field
from jsonschema import Draft202012Validator
from rest_framework import serializers

from notify.api.strict import StrictSerializer
from notify.category_labels import TEXT_KEYS, language_codes
from notify.models import Channel, QueueClass, delay_most, digest_window_most

# Empty clears the value; \Z (not $, which also takes a final newline) ends the text.
_PHONE = re.compile(r"^(?:\+[1-9][0-9]{6,14})?\Z")
_LOCALE = re.compile(r"^(?:[A-Za-z]{2,3}(?:[-_][A-Za-z0-9]{2,8})*)?\Z")
_TIMEZONES = frozenset(zoneinfo.available_timezones())
# How the schema states a time zone: a string of a named format, not an enum of every
# zone (client generators choke on ~600 members, some of which differ only in `+`/`-`).
TIME_ZONE_FORMAT = "iana-time-zone"
# A feed cursor: a `next_cursor` the API issued (notify.selectors.encode_cursor), opaque to
# clients. A named format, so that what a client may send is one it was given.
FEED_CURSOR_FORMAT = "feed-cursor"
FEED_CURSOR_SCHEMA = {"type": "string", "format": FEED_CURSOR_FORMAT, "pattern": "^[A-Za-z0-9_-]*$"}
# A well-formed time outside the window the server allows counted from now (a 422: no
# schema can state a bound that moves with the clock).
OUT_OF_WINDOW = "out_of_window"
# Ids are PostgreSQL bigints: a larger number is no id (and would fail in the database).
_BIGINT_MAX = 2**63 - 1


class NotificationIn(StrictSerializer):
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

    occurred_at = serializers.DateTimeField(
        required=False,
        help_text="When the event happened (RFC 3339); default: when accepted. The feed and "
        "each channel's sends follow this order. At most NOTIFY_OCCURRED_AT_MAX_SKEW "
        "seconds ahead of the server's clock.",
    )
    subject = serializers.CharField(
        max_length=200,
        required=False,
        allow_blank=True,
        help_text="What the event is about (e.g. order:A-1001). An event older than one the "
        "person already got about the same subject is not sent on push, SMS or email "
        "(status superseded); the feed still shows it in its place.",
    )

    def validate_occurred_at(self, value: datetime) -> datetime:
        skew = settings.NOTIFY_OCCURRED_AT_MAX_SKEW
        if value > timezone.now() + timedelta(seconds=skew):
            raise serializers.ValidationError(
                f"At most {skew:g} seconds in the future.", code=OUT_OF_WINDOW
            )
        return value

    def validate_send_at(self, value: datetime) -> datetime:
        if value > timezone.now() + timedelta(days=settings.NOTIFY_SEND_AT_MAX_DAYS):
            raise serializers.ValidationError(
                f"At most {settings.NOTIFY_SEND_AT_MAX_DAYS} days ahead.", code=OUT_OF_WINDOW
            )
        return value


class NotificationAcceptedOut(serializers.Serializer):
    notification_id = serializers.UUIDField()


class NotificationBatchIn(StrictSerializer):
    # Each event is validated on its own (one answer per event), not here.
    events = serializers.ListField(
        child=serializers.DictField(),
        allow_empty=False,
        max_length=settings.NOTIFY_BATCH_MAX_EVENTS,
    )


class ErrorOut(serializers.Serializer):
    code = serializers.CharField()
    message = serializers.CharField()
    field = serializers.CharField(required=False)


class NotificationBatchItemOut(serializers.Serializer):
    status = serializers.IntegerField(help_text="202, 400, 403, 409, 422 or 429")
    notification_id = serializers.UUIDField(required=False)
    error = ErrorOut(required=False)


class NotificationBatchOut(serializers.Serializer):
    results = NotificationBatchItemOut(many=True)


# A delivery's statuses, as the status API states them (deliveries owns the model, a
# layer above this one; tests/deliveries/pipeline/test_ordering.py keeps the two lists equal).
DELIVERY_STATUSES = (
    "queued", "sending", "retrying", "delivered", "reached", "failed", "dead", "expired",
    "suppressed", "deferred", "skipped_live", "cancelled", "superseded", "digesting",
    "digested", "skipped_read",
)  # fmt: skip


class DeliveryStatusOut(serializers.Serializer):
    channel = serializers.CharField()
    target = serializers.CharField()
    status = serializers.ChoiceField(
        choices=DELIVERY_STATUSES,
        help_text="Where the delivery stands; `delivered`: accepted by the provider (or "
        "written to the feed); `reached`: the provider reports it handed the message to the "
        "person (an email to their mailbox, an SMS to their phone); `superseded`: not sent, "
        "because a newer event about the same subject already reached the person on this "
        "channel; `digesting`: waiting in an open digest window; `digested`: listed in the "
        "digest its window sent (another delivery carried it); `skipped_read`: delayed until "
        "the in-app entry was read, and it was.",
    )
    reason = serializers.CharField()
    attempts = serializers.IntegerField()
    last_error = serializers.CharField()
    template_version = serializers.IntegerField(allow_null=True)
    next_attempt_at = serializers.DateTimeField(allow_null=True)
    held_ms = serializers.IntegerField(
        help_text="How long its last try was held back for an earlier delivery to the same "
        "person on this channel (milliseconds)."
    )
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()


class NotificationStatusOut(serializers.Serializer):
    notification_id = serializers.UUIDField()
    category = serializers.CharField()
    created_at = serializers.DateTimeField()
    occurred_at = serializers.DateTimeField()
    subject = serializers.CharField()
    send_at = serializers.DateTimeField(allow_null=True)
    cancelled_at = serializers.DateTimeField(allow_null=True)
    deliveries = DeliveryStatusOut(many=True)


_UNKNOWN_TIME_ZONE = "Unknown time zone; use an IANA name such as 'Europe/Berlin'."


def _known_time_zone(value: str) -> None:
    if value not in _TIMEZONES:
        raise serializers.ValidationError(_UNKNOWN_TIME_ZONE)


@extend_schema_field(
    {
        "type": "string",
        "format": TIME_ZONE_FORMAT,
        "description": "A time zone of the IANA tz database, by its name (e.g. Europe/Berlin, "
        "America/Argentina/Buenos_Aires, UTC), as Python's zoneinfo knows it; "
        "any other text is a 400.",
        "example": "Europe/Berlin",
    }
)
class TimeZoneField(serializers.CharField):
    """A time zone's IANA name, refused (400) unless the server's tz database knows it."""

    def __init__(self, **kwargs):
        kwargs.setdefault("trim_whitespace", False)  # the name is the whole rule
        kwargs.setdefault("error_messages", {"blank": _UNKNOWN_TIME_ZONE})
        super().__init__(**kwargs)
        self.validators.append(_known_time_zone)


class LanguageTagField(serializers.CharField):
    """A language tag such as `en` or `ru-RU`, stored with `-` (`ru_RU` is taken as
    `ru-RU`); blank, where allowed, means none is set."""

    def __init__(self, **kwargs):
        kwargs.setdefault("trim_whitespace", False)  # the pattern is the whole rule
        kwargs.setdefault("max_length", 35)
        super().__init__(**kwargs)
        # Also what the OpenAPI schema states (pattern, maxLength).
        self.validators.append(
            RegexValidator(_LOCALE, "Use a language tag such as 'en' or 'ru-RU'.")
        )

    def to_internal_value(self, data) -> str:
        return super().to_internal_value(data).replace("_", "-")


class RecipientIn(StrictSerializer):
    # The validators are also what the OpenAPI schema states (pattern, format).
    email = serializers.EmailField(required=False, allow_blank=True)
    phone = serializers.CharField(
        required=False,
        allow_blank=True,
        trim_whitespace=False,  # the pattern is the whole rule
        max_length=32,
        validators=[RegexValidator(_PHONE, "Use E.164 format, e.g. +14155550123.")],
    )
    locale = LanguageTagField(required=False, allow_blank=True)
    timezone = TimeZoneField(required=False)


class RecipientOut(serializers.Serializer):
    user_id = serializers.CharField()
    email = serializers.CharField()
    phone = serializers.CharField()
    locale = serializers.CharField()
    timezone = TimeZoneField()
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
    occurred_at = serializers.DateTimeField(help_text="When the event happened: the feed's order.")
    read_at = serializers.DateTimeField(allow_null=True)


class FeedPageOut(serializers.Serializer):
    results = FeedEntryOut(many=True)
    next_cursor = serializers.CharField(allow_null=True)
    # For an inbox that shows itself in the person's language and time zone.
    locale = serializers.CharField(help_text="The person's language tag; empty when none is set.")
    timezone = serializers.CharField(help_text="The person's IANA time zone.")


class FeedReadIn(StrictSerializer):
    # The rule `validate` applies, for the OpenAPI schema.
    openapi_extra = {
        "anyOf": [
            {"required": ["ids"], "properties": {"ids": {"minItems": 1}}},
            {"required": ["all"], "properties": {"all": {"enum": [True]}}},
        ]
    }
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


def _channel_seconds_schema(channels: list[str], most: Callable[[str], int], meaning: str) -> dict:
    """A {channel: seconds} setting as the schema states it (Category.clean refuses the
    rest); `most(channel)`: the largest value any category may have there."""
    return {
        "type": "object",
        "properties": {
            channel: {"type": "integer", "minimum": 1, "maximum": most(channel)}
            for channel in channels
        },
        "additionalProperties": False,
        "description": meaning,
    }


CATEGORY_SETTING_SCHEMAS = {
    "digest_windows": _channel_seconds_schema(
        Channel.values,
        digest_window_most,
        "Seconds per channel: at most one notification on that channel per window and "
        "recipient, listing the window's events (in-app: one entry per window). Empty: "
        "none digested. Refused on a mandatory category.",
    ),
    "delays_if_unread": _channel_seconds_schema(
        [c for c in Channel.values if c != Channel.INAPP],
        delay_most(None),
        "Seconds per channel: that channel waits, and goes only if the in-app entry is "
        "still unread then, short of the channel's deadline (shorter still when the "
        "category's TTL is). Not on a digested channel, nor while in-app is digested, nor "
        "on a mandatory category.",
    ),
}


def category_setting_fits_schema(field: str, value: object) -> bool:
    """Whether a digest setting as sent fits what the schema publishes for it (a client
    could have known a value that does not: a 400; one that fits but the category refuses
    is a 422)."""
    schema = CATEGORY_SETTING_SCHEMAS.get(field)
    return schema is None or Draft202012Validator(schema).is_valid(value)


@extend_schema_field(CATEGORY_SETTING_SCHEMAS["digest_windows"])
class DigestWindowsField(serializers.JSONField):
    """`digest_windows`: taken as sent; the category's own validation decides."""


@extend_schema_field(CATEGORY_SETTING_SCHEMAS["delays_if_unread"])
class DelaysIfUnreadField(serializers.JSONField):
    """`delays_if_unread`: taken as sent; the category's own validation decides."""


@extend_schema_field(
    {
        "type": "object",
        "description": "The category's label and description per language (a person sees "
        "their language's; without one, `description`).",
        "additionalProperties": False,
        "properties": {
            code: {
                "type": "object",
                "properties": {
                    key: {"type": "string", "maxLength": most} for key, most in TEXT_KEYS.items()
                },
                "required": list(TEXT_KEYS),
                "additionalProperties": False,
            }
            for code in language_codes()
        },
    }
)
class CategoryLabelsField(serializers.Field):
    """`labels`, read only: every language given, each with both texts ("" when unset)."""

    def to_representation(self, value: object) -> dict:
        labels = value if isinstance(value, dict) else {}
        return {
            code: {key: str((texts or {}).get(key, "")) for key in TEXT_KEYS}
            for code, texts in labels.items()
        }


class CategoryOut(serializers.Serializer):
    key = serializers.CharField()
    description = serializers.CharField()
    labels = CategoryLabelsField()
    queue = serializers.ChoiceField(choices=QueueClass.choices)
    mandatory = serializers.BooleanField()
    marketing = serializers.BooleanField()
    default_channels = serializers.ListField(child=serializers.ChoiceField(choices=Channel.choices))
    fallback_channel = serializers.CharField(help_text="A channel, or empty for none.")
    ttl_seconds = serializers.IntegerField(allow_null=True)
    digest_windows = DigestWindowsField()
    digest_key = serializers.CharField(
        help_text="A payload field whose value splits digests; empty: one window per "
        "recipient and channel."
    )
    delays_if_unread = DelaysIfUnreadField()


class CategoryListOut(serializers.Serializer):
    results = CategoryOut(many=True)


class CategoryDigestsIn(StrictSerializer):
    """The digest settings to change; those left out stay as they are."""

    digest_windows = DigestWindowsField(required=False)
    digest_key = serializers.CharField(
        required=False,
        allow_blank=True,
        trim_whitespace=False,
        max_length=100,
        help_text="A field of the category's payload schema, or empty.",
    )
    delays_if_unread = DelaysIfUnreadField(required=False)
