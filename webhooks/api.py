"""Status webhook endpoints of the calling producer: `/v1/webhooks` (scope webhooks:write).

The secret (`whsec_…`) is shown when an endpoint is created and when it is rotated.
Failed events (their retry schedule spent) are re-delivered on request (`redeliver`).
"""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from egress.origins import EndpointRefused
from notify.api.errors import ApiError
from notify.api.schema import error_responses
from notify.api.strict import StrictSerializer
from notify.models import Scope
from webhooks.endpoints import (
    EndpointLimitReached,
    endpoint_create,
    endpoint_delete,
    endpoint_enable,
    endpoint_secret_rotate,
    endpoint_update,
)
from webhooks.models import WebhookEndpoint, WebhookEventType
from webhooks.redelivery import EndpointDisabled, failed_events_redeliver

# What the egress rules take without a DNS lookup, stated for the schema: an https URL
# with a host (a name or an IPv4 address) and no credentials, its port in range. Whether
# the host is public is known only by resolving it (a 422).
HTTPS_URL_PATTERN = (
    r"^https://[^\s/?#@:\[\]]+"
    r"(?::(?:[0-9]{1,4}|[1-5][0-9]{4}|6[0-4][0-9]{3}|65[0-4][0-9]{2}|655[0-2][0-9]|6553[0-5]))?"
    r"(?:[/?#]\S*)?$"
)


class WebhookIn(StrictSerializer):
    # Checked by the egress rules (a 422 saying why), which also refuse what is no URL:
    # DRF's URLField would refuse some names RFC 3986 allows, which the schema cannot say.
    url = serializers.CharField(
        max_length=1024,
        help_text="https://host[:port][/path], whose host resolves to public addresses only "
        "(else a 422 `endpoint_not_allowed`); the private origins the operator lists "
        "(NOTIFY_WEBHOOK_ALLOWED_PRIVATE_ORIGINS) are taken as listed, http too.",
        trim_whitespace=False,
    )
    event_types = serializers.ListField(
        child=serializers.ChoiceField(choices=WebhookEventType.choices),
        min_length=1,
        max_length=len(WebhookEventType.choices),
    )
    description = serializers.CharField(max_length=200, required=False, allow_blank=True)

    openapi_extra = {"properties": {"url": {"pattern": HTTPS_URL_PATTERN}}}


class WebhookPatchIn(WebhookIn):
    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, partial=True, **kwargs)


class WebhookOut(serializers.Serializer):
    id = serializers.IntegerField()
    url = serializers.URLField()
    description = serializers.CharField()
    event_types = serializers.ListField(child=serializers.CharField())
    active = serializers.BooleanField()
    disabled_reason = serializers.CharField()
    created_at = serializers.DateTimeField()


class WebhookSecretOut(WebhookOut):
    secret = serializers.CharField(help_text="The signing secret (`whsec_…`): shown only now.")


class WebhookListOut(serializers.Serializer):
    results = WebhookOut(many=True)


def _shape(endpoint: WebhookEndpoint, *, secret: bool = False) -> dict:
    shaped = {
        "id": endpoint.pk,
        "url": endpoint.url,
        "description": endpoint.description,
        "event_types": sorted(endpoint.subscriptions.values_list("event_type", flat=True)),
        "active": endpoint.active,
        "disabled_reason": endpoint.disabled_reason,
        "created_at": endpoint.created_at,
    }
    if secret:
        shaped["secret"] = endpoint.secret
    return shaped


def _refused(refused: EndpointRefused) -> ApiError:
    """A well-formed URL we may not post to (it depends on DNS, which no schema says)."""
    return ApiError(422, "endpoint_not_allowed", f"This URL {refused.reason}.", field="url")


def _own_endpoint(request: Request, webhook_id: int) -> WebhookEndpoint:
    found = WebhookEndpoint.objects.filter(pk=webhook_id, producer=request.user.producer).first()
    if found is None:
        raise ApiError(404, "not_found", "No such webhook endpoint.")
    return found


class WebhookListApi(APIView):
    required_scope = Scope.WEBHOOKS_WRITE

    @extend_schema(
        operation_id="list_webhooks",
        responses={200: WebhookListOut},
        summary="List your webhook endpoints.",
    )
    def get(self, request: Request) -> Response:
        endpoints = WebhookEndpoint.objects.filter(producer=request.user.producer)
        return Response({"results": [_shape(e) for e in endpoints]})

    @extend_schema(
        operation_id="register_webhook",
        request=WebhookIn,
        responses={201: WebhookSecretOut, **error_responses(409, 422)},
        summary="Register a webhook endpoint for the event types given; its secret is "
        "shown once. A private, loopback or metadata address is refused (422).",
    )
    def post(self, request: Request) -> Response:
        data_in = WebhookIn(data=request.data)
        data_in.is_valid(raise_exception=True)
        data = data_in.validated_data
        try:
            endpoint = endpoint_create(
                producer=request.user.producer,
                url=data["url"],
                event_types=data["event_types"],
                description=data.get("description", ""),
            )
        except EndpointRefused as refused:
            raise _refused(refused) from None
        except EndpointLimitReached:
            raise ApiError(
                409,
                "too_many_endpoints",
                "This producer has as many webhook endpoints as it may have.",
            ) from None
        return Response(_shape(endpoint, secret=True), status=status.HTTP_201_CREATED)


class WebhookDetailApi(APIView):
    required_scope = Scope.WEBHOOKS_WRITE

    @extend_schema(
        operation_id="get_webhook", responses={200: WebhookOut}, summary="One webhook endpoint."
    )
    def get(self, request: Request, webhook_id: int) -> Response:
        return Response(_shape(_own_endpoint(request, webhook_id)))

    @extend_schema(
        operation_id="update_webhook",
        request=WebhookPatchIn,
        responses={200: WebhookOut, **error_responses(422)},
        summary="Change a webhook endpoint's URL, event types or description.",
    )
    def patch(self, request: Request, webhook_id: int) -> Response:
        endpoint = _own_endpoint(request, webhook_id)
        data_in = WebhookPatchIn(data=request.data)
        data_in.is_valid(raise_exception=True)
        data = data_in.validated_data
        try:
            endpoint = endpoint_update(
                endpoint=endpoint,
                url=data.get("url"),
                event_types=data.get("event_types"),
                description=data.get("description"),
            )
        except EndpointRefused as refused:
            raise _refused(refused) from None
        return Response(_shape(endpoint))

    @extend_schema(
        operation_id="remove_webhook",
        responses={204: None},
        summary="Remove a webhook endpoint and its events.",
    )
    def delete(self, request: Request, webhook_id: int) -> Response:
        endpoint_delete(endpoint=_own_endpoint(request, webhook_id))
        return Response(status=status.HTTP_204_NO_CONTENT)


class WebhookRotateApi(APIView):
    required_scope = Scope.WEBHOOKS_WRITE

    @extend_schema(
        operation_id="rotate_webhook_secret",
        request=None,
        responses={200: WebhookSecretOut},
        summary="Rotate the signing secret; the old one also signs for a while "
        "(NOTIFY_WEBHOOK_SECRET_OVERLAP).",
    )
    def post(self, request: Request, webhook_id: int) -> Response:
        endpoint = endpoint_secret_rotate(endpoint=_own_endpoint(request, webhook_id))
        return Response(_shape(endpoint, secret=True))


class WebhookEnableApi(APIView):
    required_scope = Scope.WEBHOOKS_WRITE

    @extend_schema(
        operation_id="enable_webhook",
        request=None,
        responses={200: WebhookOut, **error_responses(422)},
        summary="Re-enable an endpoint that was disabled for failing; what waited is sent.",
    )
    def post(self, request: Request, webhook_id: int) -> Response:
        endpoint = _own_endpoint(request, webhook_id)
        try:
            endpoint_update(endpoint=endpoint, url=endpoint.url)  # checked again first
        except EndpointRefused as refused:
            raise _refused(refused) from None
        endpoint_enable(endpoint=endpoint)
        return Response(_shape(endpoint))


# Event ids one re-delivery may name: a receiver lists what it missed, a page at a time.
REDELIVER_IDS_MAX = 1000


class WebhookRedeliverIn(StrictSerializer):
    """Which failed events to post again: those written from `since` (until `until`, by
    default now), or those named by `event_ids`; both together narrow each other."""

    # The rule `validate` applies, for the OpenAPI schema.
    openapi_extra = {"anyOf": [{"required": ["since"]}, {"required": ["event_ids"]}]}
    since = serializers.DateTimeField(
        required=False, help_text="Events written at or after this time (RFC 3339)."
    )
    until = serializers.DateTimeField(
        required=False,
        help_text="Events written before this time (RFC 3339); an empty range queues nothing.",
    )
    event_ids = serializers.ListField(
        child=serializers.CharField(max_length=64),
        required=False,
        allow_empty=False,
        max_length=REDELIVER_IDS_MAX,
        help_text="The events' `webhook-id`s (`msg_…`); ids of events not failed, or not "
        "this endpoint's, are left out of the count.",
    )

    def validate(self, attrs: dict) -> dict:
        if "since" not in attrs and "event_ids" not in attrs:
            raise serializers.ValidationError(
                {"since": "Give `since` (and `until`), or `event_ids`."}
            )
        return attrs


class WebhookRedeliverOut(serializers.Serializer):
    queued = serializers.IntegerField(help_text="Failed events queued to be posted again now.")
    more = serializers.BooleanField(
        help_text="More failed events match than one call queues "
        "(NOTIFY_WEBHOOK_REDELIVER_MAX): call again."
    )


class WebhookRedeliverApi(APIView):
    required_scope = Scope.WEBHOOKS_WRITE

    @extend_schema(
        operation_id="redeliver_webhook_events",
        request=WebhookRedeliverIn,
        responses={202: WebhookRedeliverOut, **error_responses(409)},
        summary="Post failed events (retries spent) again, by time or by id, oldest first; "
        "each notification's events in order. A disabled endpoint is a 409: re-enable it.",
    )
    def post(self, request: Request, webhook_id: int) -> Response:
        endpoint = _own_endpoint(request, webhook_id)
        data_in = WebhookRedeliverIn(data=request.data)
        data_in.is_valid(raise_exception=True)
        data = data_in.validated_data
        try:
            done = failed_events_redeliver(
                endpoint=endpoint,
                since=data.get("since"),
                until=data.get("until"),
                msg_ids=data.get("event_ids"),
            )
        except EndpointDisabled:
            raise ApiError(
                409,
                "endpoint_disabled",
                "This endpoint is disabled: re-enable it first (what waited is posted then).",
            ) from None
        return Response({"queued": done.queued, "more": done.more}, status=status.HTTP_202_ACCEPTED)
