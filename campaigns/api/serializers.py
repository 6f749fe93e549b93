"""Request and response shapes of the campaign API."""

from __future__ import annotations

from django.conf import settings
from rest_framework import serializers

from campaigns.audience import SEGMENT_FLAGS, SEGMENT_LISTS
from campaigns.models import SEND_RATE_MAX, SEND_RATE_MIN
from notify.api.strict import StrictSerializer


class AudienceIn(StrictSerializer):
    # Exactly one of the three; the view says which is missing or extra. Lists are
    # checked by `campaigns.audience.audience_problem` (its bound is a setting).
    user_ids = serializers.ListField(
        required=False, help_text="Up to NOTIFY_CAMPAIGN_MAX_USER_IDS user ids."
    )
    segment = serializers.DictField(required=False)
    all = serializers.BooleanField(required=False)

    @property
    def openapi_extra(self) -> dict:
        """The rules of the view and `audience_problem`, for the OpenAPI schema."""
        values = {
            "anyOf": [
                {"type": "string"},
                {"type": "array", "items": {"type": "string"}, "minItems": 1},
            ]
        }
        return {
            "oneOf": [{"required": [kind]} for kind in ("user_ids", "segment", "all")],
            "properties": {
                "user_ids": {
                    "items": {"type": "string", "minLength": 1},
                    "minItems": 1,
                    "maxItems": settings.NOTIFY_CAMPAIGN_MAX_USER_IDS,
                },
                "segment": {
                    "properties": {
                        **{name: values for name in SEGMENT_LISTS},
                        **{name: {"type": "boolean"} for name in SEGMENT_FLAGS},
                    },
                    "additionalProperties": False,
                    "minProperties": 1,
                },
                "all": {"enum": [True]},
            },
        }


class CampaignIn(StrictSerializer):
    name = serializers.CharField(max_length=200)
    category = serializers.CharField(max_length=100)
    payload = serializers.DictField(default=dict)
    audience = AudienceIn()
    send_at = serializers.DateTimeField(required=False, allow_null=True)
    send_rate = serializers.FloatField(
        required=False,
        allow_null=True,
        min_value=SEND_RATE_MIN,
        max_value=SEND_RATE_MAX,
        help_text="Messages per second (at most the low class's share of the providers' "
        "buckets); empty: as fast as they allow.",
    )
    local_time = serializers.TimeField(
        required=False,
        allow_null=True,
        help_text="Deliver at this wall-clock time (HH:MM) in each person's zone, the next "
        "one within 24 h; quiet hours still win.",
    )


class CampaignLaunchedOut(serializers.Serializer):
    campaign_id = serializers.IntegerField()


class DeliveryCountOut(serializers.Serializer):
    status = serializers.CharField()
    reason = serializers.CharField()
    count = serializers.IntegerField()


class CampaignOut(serializers.Serializer):
    campaign_id = serializers.IntegerField()
    name = serializers.CharField()
    category = serializers.CharField()
    status = serializers.CharField()
    send_at = serializers.DateTimeField(allow_null=True)
    send_rate = serializers.FloatField(allow_null=True)
    local_time = serializers.TimeField(allow_null=True)
    launched_at = serializers.DateTimeField()
    audience_size = serializers.IntegerField()
    created = serializers.IntegerField()
    members = serializers.DictField(
        child=serializers.IntegerField(),
        help_text="Each audience member under exactly one status; sums to audience_size.",
    )
    deliveries = DeliveryCountOut(many=True)
    email = serializers.DictField(
        child=serializers.IntegerField(),
        help_text="The emails the provider accepted (`accepted`), each counted once under the "
        "furthest news about it: complained, bounced, opened, delivered or accepted_only "
        "(no word yet); these sum to accepted.",
    )


class ChannelEstimateOut(serializers.Serializer):
    channel = serializers.CharField()
    send = serializers.IntegerField(help_text="Messages that go out at their time.")
    deferred = serializers.IntegerField(help_text="Held by quiet hours until they end.")
    digested = serializers.IntegerField(
        help_text="Gathered into a digest (routing never digests a campaign's notifications: 0)."
    )
    delayed = serializers.IntegerField(
        help_text="Delayed until the in-app entry is read (never for a campaign: 0)."
    )
    expired = serializers.IntegerField(
        help_text="Would end expired: quiet hours outlasting the deadline, or (unpaced) a wait "
        "for the provider's campaign share longer than it."
    )
    expired_examples = serializers.ListField(
        child=serializers.CharField(), help_text="Up to ten of the people whose message expires."
    )
    suppressed = serializers.DictField(
        child=serializers.IntegerField(), help_text="Messages held back, by reason."
    )


class SampleOut(serializers.Serializer):
    locale = serializers.CharField()
    channel = serializers.CharField()
    template_locale = serializers.CharField(help_text="The template's locale (its fallback).")
    rendered = serializers.DictField(child=serializers.CharField())
    problem = serializers.CharField()


class CampaignEstimateOut(serializers.Serializer):
    audience = serializers.IntegerField()
    decided = serializers.IntegerField(
        help_text="Members the gate was asked about: all of them, or past "
        "NOTIFY_CAMPAIGN_ESTIMATE_MEMBERS an even sample (the counts are scaled to the audience)."
    )
    channels = ChannelEstimateOut(many=True)
    rate = serializers.FloatField(
        allow_null=True, help_text="Members released a second; null: unpaced."
    )
    duration_seconds = serializers.FloatField()
    samples = SampleOut(many=True)
