"""Device registration shapes (DESIGN.md section 12)."""

from __future__ import annotations

import base64
import re

from django.conf import settings
from rest_framework import serializers

from deliveries.models import DeviceKind
from egress.origins import allowed_origins
from notify.api.strict import StrictSerializer

_B64URL = re.compile(r"^[A-Za-z0-9_-]+={0,2}\Z")
# What the checks below accept, as the OpenAPI schema states it: an uncompressed P-256
# point is 65 bytes starting with 0x04 (87 characters, "B" then A-P); a secret 16 bytes.
_P256DH_PATTERN = r"^B[A-P][A-Za-z0-9_-]{85}=?$"
_AUTH_PATTERN = r"^[A-Za-z0-9_-]{22}={0,2}$"
_DEFAULT_PORTS = {"http": 80, "https": 443}


def _b64url_bytes(value: str) -> bytes:
    """Strict base64url (padding optional): a stray character is an error, not skipped."""
    if not _B64URL.match(value):
        raise serializers.ValidationError("must be base64url")
    try:
        return base64.b64decode(value + "=" * (-len(value) % 4), altchars=b"-_", validate=True)
    except (ValueError, TypeError):
        raise serializers.ValidationError("must be base64url") from None


def _caseless(text: str) -> str:
    """`text` as a regex matching it in any letter case (ECMA has no inline flag)."""
    return "".join(
        f"[{c.lower()}{c.upper()}]" if c.isalpha() else re.escape(c).replace("\\-", "-")
        for c in text
    )


def endpoint_pattern() -> str:
    """A Web Push endpoint this server registers, as a regex over the whole URL: one of
    WEBPUSH_ALLOWED_ORIGINS (scheme and host in any case, the default port optional),
    then a path, query or fragment without whitespace as Django's URL check counts it
    (Python's regex: also the separators U+001C to U+001F and NEL, which an ECMA regex
    does not count). A host reached through a `*.` wildcard must also resolve to public
    addresses, which no pattern can say."""
    label = "[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
    origins = []
    for origin in allowed_origins(tuple(settings.WEBPUSH_ALLOWED_ORIGINS)):
        host = (f"(?:{label}\\.)+" if origin.wildcard else "") + _caseless(origin.host)
        port = f":{origin.port}"
        if _DEFAULT_PORTS[origin.scheme] == origin.port:
            port = f"(?:{port})?"
        origins.append(f"{_caseless(origin.scheme)}://{host}{port}")
    return f"^(?:{'|'.join(origins) or '(?!)'})(?:[/?#][^\\s\\u001c-\\u001f\\u0085]*)?$"


class WebPushKeysIn(StrictSerializer):
    p256dh = serializers.CharField(max_length=255, trim_whitespace=False)
    auth = serializers.CharField(max_length=255, trim_whitespace=False)
    openapi_extra = {
        "properties": {"p256dh": {"pattern": _P256DH_PATTERN}, "auth": {"pattern": _AUTH_PATTERN}}
    }

    def validate_p256dh(self, value: str) -> str:
        raw = _b64url_bytes(value)
        if len(raw) != 65 or raw[0] != 4:
            raise serializers.ValidationError("must be an uncompressed P-256 public key")
        return value

    def validate_auth(self, value: str) -> str:
        if len(_b64url_bytes(value)) != 16:
            raise serializers.ValidationError("must be a 16-byte auth secret")
        return value


class DeviceIn(StrictSerializer):
    """`{"kind": "webpush", "endpoint", "keys"}` or `{"kind": "fcm", "token", "platform"}`.

    Optional extensions: `installation_id` (the client's stable id for this browser/app)
    and `previous` (the endpoint/token this registration replaces); either lets a
    re-registration update the same device in place.
    """

    kind = serializers.ChoiceField(choices=DeviceKind.choices)
    endpoint = serializers.URLField(max_length=1024, required=False, trim_whitespace=False)
    keys = WebPushKeysIn(required=False)
    token = serializers.CharField(max_length=4096, required=False)
    platform = serializers.ChoiceField(choices=["android", "ios", "web"], required=False)
    installation_id = serializers.CharField(max_length=255, required=False, default="")
    previous = serializers.CharField(max_length=4096, required=False, default="")

    @property
    def openapi_extra(self) -> dict:
        """The rule `validate` and the push origins apply, for the OpenAPI schema."""
        return {
            "anyOf": [
                {
                    "properties": {"kind": {"enum": [DeviceKind.WEBPUSH.value]}},
                    "required": ["endpoint", "keys"],
                },
                {"properties": {"kind": {"enum": [DeviceKind.FCM.value]}}, "required": ["token"]},
            ],
            # The pattern is the whole rule: Django's URL check takes IRIs, which the
            # `uri` format does not.
            "properties": {"endpoint": {"pattern": endpoint_pattern(), "format": None}},
        }

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
