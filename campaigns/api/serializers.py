"""Request and response shapes of the campaign API."""

from __future__ import annotations

from rest_framework import serializers


class AudienceIn(serializers.Serializer):
    # Exactly one of the three; the view says which is missing or extra. Lists are
    # checked by `campaigns.audience.audience_problem` (its bound is a setting).
    user_ids = serializers.ListField(required=False, help_text="Up to 100,000 user ids.")
    segment = serializers.DictField(required=False)
    all = serializers.BooleanField(required=False)


class CampaignIn(serializers.Serializer):
    name = serializers.CharField(max_length=200)
    category = serializers.CharField(max_length=100)
    payload = serializers.DictField(default=dict)
    audience = AudienceIn()
    send_at = serializers.DateTimeField(required=False, allow_null=True)


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
    launched_at = serializers.DateTimeField()
    audience_size = serializers.IntegerField()
    created = serializers.IntegerField()
    members = serializers.DictField(
        child=serializers.IntegerField(),
        help_text="Each audience member under exactly one status; sums to audience_size.",
    )
    deliveries = DeliveryCountOut(many=True)
