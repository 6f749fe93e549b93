"""Through the real Celery worker: its child process binds, sends, and applies receipts."""

from __future__ import annotations

from deliveries.models import Delivery, DeliveryStatus
from deliveries.pipeline.routing import notification_route
from tests.waiting import wait_for


def test_the_worker_sends_the_sms_on_its_own_bind_and_applies_the_receipt(
    smsc, login_code_for_worker
):
    smsc.receipt_state = "UNDELIV"
    notification = login_code_for_worker("987654")
    notification_route(notification_id=str(notification.pk))  # the gate here allows sms
    delivery = Delivery.objects.get(notification=notification, channel="sms")

    submit = wait_for(lambda: smsc.accepted(), what="the worker's submit_sm", timeout=30)[0]
    assert submit.destination_addr == "79990000000"

    def failed():
        delivery.refresh_from_db()
        return delivery.status == DeliveryStatus.FAILED

    # The receipt came back on the worker's bind and its reader thread updated the row.
    wait_for(failed, what="the UNDELIV receipt applied by the worker", timeout=30)
    assert delivery.provider_message_id == submit.message_id
    assert "stat:UNDELIV" in delivery.last_error
    assert smsc.binds and all(system_id == "notify-test" for _, system_id in smsc.binds)
