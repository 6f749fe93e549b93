""" "Send test to me" on an SMS template: the code reaches the staff member's phone
through the SMS channel and the local SMSC peer."""

from __future__ import annotations

from deliveries.models import Delivery, DeliveryStatus
from deliveries.pipeline.attempt import delivery_attempt
from tests.templates_admin.conftest import editor, editor_client, me, published_template, send_test

__all__ = ["editor", "editor_client", "me"]  # fixtures used below


def test_an_sms_test_reaches_my_phone_through_the_sms_channel(
    editor_client,
    me,
    sms_session,
    smsc,
):
    login_code = published_template("security.login_code", "sms")
    said = send_test(editor_client, login_code, {"code": "271828"})

    assert said == ["Test sms queued for the phone of recipient ed-1."]
    delivery = Delivery.objects.get(notification__recipient=me, channel="sms")
    assert (delivery.target, delivery.status) == ("+14155550142", DeliveryStatus.QUEUED)
    # The sender (run here rather than by a worker) accepts the test seal and sends it.
    delivery_attempt(delivery_id=delivery.pk)
    delivery.refresh_from_db()
    assert delivery.status == DeliveryStatus.DELIVERED, delivery.last_error
    [submit] = smsc.submits
    assert submit.destination_addr == "14155550142"  # E.164 without the plus, on the wire
    assert b"Your login code: 271828" in submit.short_message
