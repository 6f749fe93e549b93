"""Device endpoints: register (or re-register in place) and remove."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from deliveries.api import serializers as s
from deliveries.pipeline.cancel import Cancelled, notification_cancel
from deliveries.pipeline.devices import device_register, device_remove
from deliveries.selectors import notification_status
from egress.origins import EndpointRefused
from notify.api import serializers as notify_s
from notify.api.errors import ApiError
from notify.api.lookups import recipient_or_404
from notify.api.schema import error_responses, linked_from
from notify.models import Scope


class DeviceRegisterApi(APIView):
    required_scope = Scope.DEVICES_WRITE
    user_token_allowed = True

    @extend_schema(
        operation_id="register_device",
        extensions=linked_from("upsert_user", ("200", "201"), user_id="$request.path.user_id"),
        request=s.DeviceIn,
        responses={201: s.DeviceOut},
        summary="Register a Web Push subscription or FCM token; the same browser/app "
        "registering again keeps its device id.",
    )
    def post(self, request: Request, user_id: str) -> Response:
        recipient = recipient_or_404(user_id)
        data_in = s.DeviceIn(data=request.data)
        data_in.is_valid(raise_exception=True)
        data = data_in.validated_data
        keys = data.get("keys") or {}
        try:
            device, _created = device_register(
                recipient=recipient,
                kind=data["kind"],
                endpoint=data.get("endpoint", ""),
                p256dh=keys.get("p256dh", ""),
                auth=keys.get("auth", ""),
                token=data.get("token", ""),
                platform=data.get("platform", "web" if data["kind"] == "webpush" else ""),
                installation_id=data["installation_id"],
                previous=data["previous"],
            )
        except EndpointRefused as refused:
            raise ApiError(
                400,
                "endpoint_not_allowed",
                f"This push endpoint {refused.reason}.",
                field="endpoint",
            ) from None
        # 201 either way: the contract promises it, and the id is the same on a repeat.
        return Response({"device_id": device.pk}, status=status.HTTP_201_CREATED)


class DeviceDeleteApi(APIView):
    required_scope = Scope.DEVICES_WRITE
    user_token_allowed = True

    @extend_schema(
        operation_id="remove_device",
        extensions=linked_from(
            "register_device",
            ("201",),
            user_id="$request.path.user_id",
            device_id="$response.body#/device_id",
        ),
        responses={204: None},
        summary="Remove a device: no more pushes to it.",
    )
    def delete(self, request: Request, user_id: str, device_id: int) -> Response:
        recipient = recipient_or_404(user_id)
        if not device_remove(recipient=recipient, device_id=device_id):
            raise ApiError(404, "not_found", "No such device for this recipient.")
        return Response(status=status.HTTP_204_NO_CONTENT)


class NotificationStatusApi(APIView):
    # A sender reads what its own producer sent (others' are 404), as support tools do.
    required_scope = (Scope.NOTIFICATIONS_SEND, Scope.USERS_READ)

    @extend_schema(
        operation_id="get_notification_status",
        extensions=linked_from(
            "send_notification", ("202",), notification_id="$response.body#/notification_id"
        ),
        responses={200: notify_s.NotificationStatusOut},
        summary="Per-channel outcome.",
    )
    def get(self, request: Request, notification_id) -> Response:
        found = notification_status(producer=request.user.producer, notification_id=notification_id)
        if found is None:
            raise ApiError(404, "not_found", "No such notification.")
        return Response(notify_s.NotificationStatusOut(found).data)


class NotificationCancelApi(APIView):
    required_scope = Scope.NOTIFICATIONS_SEND

    @extend_schema(
        operation_id="cancel_notification",
        extensions=linked_from(
            "send_notification", ("202",), notification_id="$response.body#/notification_id"
        ),
        responses={204: None, **error_responses(409)},
        summary="Cancel what is not sent yet of a notification.",
        description=(
            "Deliveries still waiting (queued, retrying, deferred by quiet hours) become "
            "`cancelled`; one being sent or already sent is left as it is. 409 when "
            "nothing was left to cancel."
        ),
    )
    def delete(self, request: Request, notification_id) -> Response:
        outcome = notification_cancel(
            producer=request.user.producer, notification_id=notification_id
        )
        if outcome is Cancelled.NOT_FOUND:
            raise ApiError(404, "not_found", "No such notification.")
        if outcome is Cancelled.NOTHING_LEFT:
            raise ApiError(409, "already_sent", "Nothing of this notification is left to send.")
        return Response(status=status.HTTP_204_NO_CONTENT)
