"""Device registration shapes (DESIGN.md section 12)."""

from __future__ import annotations

import base64

from rest_framework import serializers

from deliveries.models import DeviceKind


def _b64url_bytes(value: str) -> bytes:
    try:
        return base64.urlsafe_b64decode(value + "=" * (-len(value) % 4))
    except (ValueError, TypeError):
        raise serializers.ValidationError("must be base64url") from None


class WebPushKeysIn(serializers.Serializer):
    p256dh = serializers.CharField(max_length=255)
    auth = serializers.CharField(max_length=255)

    def validate_p256dh(self, value: str) -> str:
        raw = _b64url_bytes(value)
        if len(raw) != 65 or raw[0] != 4:
            raise serializers.ValidationError("must be an uncompressed P-256 public key")
        return value

    def validate_auth(self, value: str) -> str:
        if len(_b64url_bytes(value)) != 16:
            raise serializers.ValidationError("must be a 16-byte auth secret")
        return value


class DeviceIn(serializers.Serializer):
    """`{"kind": "webpush", "endpoint", "keys"}` or `{"kind": "fcm", "token", "platform"}`.

    Optional extensions: `installation_id` (the client's stable id for this browser/app)
    and `previous` (the endpoint/token this registration replaces); either lets a
    re-registration update the same device in place.
    """

    kind = serializers.ChoiceField(choices=DeviceKind.choices)
    endpoint = serializers.URLField(max_length=1024, required=False)
    keys = WebPushKeysIn(required=False)
    token = serializers.CharField(max_length=4096, required=False)
    platform = serializers.ChoiceField(choices=["android", "ios", "web"], required=False)
    installation_id = serializers.CharField(max_length=255, required=False, default="")
    previous = serializers.CharField(max_length=4096, required=False, default="")

    def validate(self, data: dict) -> dict:
        if data["kind"] == DeviceKind.WEBPUSH:
            if not data.get("endpoint"):
                raise serializers.ValidationError({"endpoint": "required for webpush"})
            if not data.get("keys"):
                raise serializers.ValidationError({"keys": "required for webpush"})
        elif not data.get("token"):
            raise serializers.ValidationError({"token": "required for fcm"})
        return data


class DeviceOut(serializers.Serializer):
    device_id = serializers.IntegerField()
