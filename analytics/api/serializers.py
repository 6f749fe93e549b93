"""The analytics API's documents (output only: both operations take query parameters)."""

from __future__ import annotations

from rest_framework import serializers


class ChannelReportOut(serializers.Serializer):
    audience = serializers.IntegerField(help_text="Deliveries created for the channel.")
    suppressed = serializers.IntegerField()
    suppressed_by_reason = serializers.DictField(child=serializers.IntegerField())
    digested = serializers.IntegerField()
    sent = serializers.IntegerField(help_text="Tries made at the provider.")
    delivered = serializers.IntegerField(help_text="Handed to the provider (or the feed).")
    reached = serializers.IntegerField(help_text="The provider reported it reached the person.")
    failed = serializers.IntegerField(help_text="Ended failed, dead or expired.")
    failed_by_reason = serializers.DictField(child=serializers.IntegerField())
    bounced = serializers.IntegerField()
    complained = serializers.IntegerField()
    opened = serializers.IntegerField()
    clicked = serializers.IntegerField()
    unsubscribed = serializers.IntegerField()
    read = serializers.IntegerField(help_text="Read in the in-app feed.")


class CampaignReportOut(serializers.Serializer):
    campaign_id = serializers.IntegerField()
    channels = serializers.DictField(child=ChannelReportOut())
    as_of = serializers.DateTimeField(help_text="Every event before this is counted.")
    lag_seconds = serializers.FloatField(help_text="How far `as_of` is behind now.")


class PercentilesOut(serializers.Serializer):
    p50 = serializers.IntegerField()
    p90 = serializers.IntegerField()
    p99 = serializers.IntegerField()


class LatencyOut(serializers.Serializer):
    accepted_to_provider = PercentilesOut(required=False)
    provider_to_reached = PercentilesOut(required=False)


class DeliveryGroupOut(serializers.Serializer):
    day = serializers.DateField(required=False)
    category = serializers.CharField(required=False)
    channel = serializers.CharField(required=False)
    provider = serializers.CharField(required=False)
    counts = serializers.DictField(
        child=serializers.IntegerField(), help_text="Events by kind (docs/analytics.md)."
    )
    latency_ms = LatencyOut()


class DeliveriesReportOut(serializers.Serializer):
    # "from" is a keyword: the field is declared under another name and renamed.
    to = serializers.DateField(help_text="The last day covered (UTC), included.")
    results = DeliveryGroupOut(many=True)
    as_of = serializers.DateTimeField()
    lag_seconds = serializers.FloatField()


DeliveriesReportOut._declared_fields["from"] = serializers.DateField(
    help_text="The first day covered (UTC), included."
)


class HistoryEventOut(serializers.Serializer):
    occurred_at = serializers.CharField(
        help_text="When it happened (UTC); for an archived delivery, when it was accepted."
    )
    source = serializers.ChoiceField(
        choices=["events", "archive"],
        help_text="`events`: an event of the analytics store; `archive`: a delivery of a "
        "month past retention, read in place from the history archive.",
    )
    kind = serializers.CharField(help_text="The event's kind; `delivery` for an archived one.")
    status = serializers.CharField(help_text="An archived delivery's last status; else empty.")
    attempts = serializers.IntegerField(help_text="An archived delivery's attempts; else 0.")
    channel = serializers.CharField()
    category = serializers.CharField()
    provider = serializers.CharField()
    reason = serializers.CharField()
    delivery_id = serializers.IntegerField()
    notification_id = serializers.CharField()
    cursor = serializers.CharField(help_text="`cursor` of the page that follows this event.")


class HistoryPageOut(serializers.Serializer):
    results = HistoryEventOut(many=True)
    next_cursor = serializers.CharField(
        allow_null=True, help_text="`cursor` of the next (older) page; null on the last."
    )
