"""Classification for push: every row of the Web Push and FCM answer tables, one case each, and
which answers deactivate the device (only those proving the subscription is dead)."""

from __future__ import annotations

import pytest
import requests
from firebase_admin import exceptions, messaging

from deliveries.channels import fcm, webpush
from deliveries.models import AttemptOutcome, Device
from deliveries.pipeline.devices import devices_gone_deactivate
from notify.models import Recipient

T, P, D = AttemptOutcome.TRANSIENT, AttemptOutcome.PERMANENT, AttemptOutcome.DELIVERED


@pytest.fixture
def device(db) -> Device:
    recipient = Recipient.objects.create(user_id="push-rows")
    return Device.objects.create(
        recipient=recipient,
        kind="webpush",
        endpoint="https://push.example/sub/1",
        p256dh="k",
        auth="a",
    )


def http_answer(status: int, headers: dict[str, str] | None = None) -> requests.Response:
    response = requests.Response()
    response.status_code = status
    response.headers.update(headers or {})
    response._content = b"push service says hello"
    return response


@pytest.mark.parametrize(
    ("status", "headers", "outcome", "deactivated", "retry_after"),
    [
        (201, {"Location": "https://push.example/m/1"}, D, False, None),
        (404, {}, P, True, None),
        (410, {}, P, True, None),
        (400, {}, P, False, None),
        (413, {}, P, False, None),
        (429, {"Retry-After": "2"}, T, False, 2.0),
        (500, {}, T, False, None),
        (503, {"Retry-After": "30"}, T, False, 30.0),
        # The subscription is bound to another VAPID key: it can never take our pushes.
        (401, {}, P, True, None),
        (403, {}, P, True, None),
        # Whatever else an endpoint makes up is about it, not the push service: permanent.
        (418, {}, P, False, None),
    ],
)
def test_each_web_push_answer_is_classified(
    device, status, headers, outcome, deactivated, retry_after
):
    result = webpush.classify_response(http_answer(status, headers))
    # The channel reports a gone device; the outcome step deactivates it thus.
    devices_gone_deactivate(answers=[("webpush", str(device.pk), result)])
    device.refresh_from_db()
    assert result.outcome == outcome
    assert result.retry_after == retry_after
    assert device.active is not deactivated


def fcm_failure(error: Exception) -> messaging.SendResponse:
    return messaging.SendResponse(None, error)


@pytest.mark.parametrize(
    ("response", "outcome", "code"),
    [
        (messaging.SendResponse({"name": "projects/p/messages/1"}, None), D, ""),
        (fcm_failure(messaging.UnregisteredError("gone")), P, "UNREGISTERED"),
        (fcm_failure(messaging.SenderIdMismatchError("other sender")), P, "SENDER_ID_MISMATCH"),
        (fcm_failure(exceptions.InvalidArgumentError("bad message")), P, "INVALID_ARGUMENT"),
        (fcm_failure(messaging.QuotaExceededError("slow down")), T, "RESOURCE_EXHAUSTED"),
        (fcm_failure(exceptions.UnavailableError("down")), T, "UNAVAILABLE"),
        (fcm_failure(exceptions.InternalError("oops")), T, "INTERNAL"),
        (fcm_failure(messaging.ThirdPartyAuthError("apns cert")), T, "UNAUTHENTICATED"),
    ],
)
def test_each_fcm_answer_is_classified(response, outcome, code):
    result, error_code = fcm.classify_response(response)
    assert result.outcome == outcome
    assert error_code == code


def test_only_answers_that_prove_the_token_is_gone_deactivate_an_fcm_device():
    from deliveries.pipeline.devices import PERMANENT_DEVICE_CODES

    assert PERMANENT_DEVICE_CODES["fcm"] == {"UNREGISTERED", "SENDER_ID_MISMATCH"}
    assert "INVALID_ARGUMENT" not in PERMANENT_DEVICE_CODES["fcm"]
