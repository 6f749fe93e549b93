"""Through the real Celery worker: its child process binds, sends, and applies receipts."""

from __future__ import annotations

import os
import time

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


def test_the_workers_delivered_receipt_marks_the_sms_reached_and_posts_it_once(
    smsc, login_code_for_worker, workers_with
):
    """DELIVRD on the worker's bind: the delivery becomes `reached` and the producer's
    loopback endpoint gets one signed `delivery.reached` post, though the SMSC sends the
    receipt twice."""
    from standardwebhooks.webhooks import Webhook

    from notify.models import Producer
    from tests.peers.webhooks import WebhookReceiver
    from webhooks.endpoints import endpoint_create

    receiver = WebhookReceiver(int(os.environ["NOTIFY_TEST_WEBHOOK_PORT"]))
    receiver.start()
    try:
        producer, _ = Producer.objects.get_or_create(name="sms-tests")
        endpoint = endpoint_create(
            producer=producer, url=receiver.url, event_types=["delivery.reached"]
        )
        workers_with()  # fresh processes: they see the subscription at once
        smsc.receipt_copies = 2
        notification = login_code_for_worker("314159")
        notification_route(notification_id=str(notification.pk))
        delivery = Delivery.objects.get(notification=notification, channel="sms")

        def reached():
            delivery.refresh_from_db()
            return delivery.status == DeliveryStatus.REACHED

        wait_for(reached, what="the DELIVRD receipt applied by the worker", timeout=30)
        receipt = smsc.receipts[delivery.provider_message_id]

        def both_acknowledged():
            # A copy that overtook the recording of the send is answered "try later"
            # (0x64) and comes again; every copy ends acknowledged, none refused.
            answers = receipt.answers
            return answers.count(0) == 2 and set(answers) <= {0, 0x64} and answers

        try:
            wait_for(both_acknowledged, what="both copies acknowledged")
        except AssertionError as timed_out:
            raise AssertionError(f"{timed_out}; the answers: {receipt.answers}") from None
        [(headers, body)] = wait_for(receiver.accepted, what="the delivery.reached post")
        time.sleep(1)  # nothing more arrives: the second copy posted nothing
        assert len(receiver.received) == 1
        payload = Webhook(endpoint.secret).verify(body, {k.lower(): v for k, v in headers.items()})
        assert payload["type"] == "delivery.reached"
        assert payload["data"]["delivery_id"] == delivery.pk
        assert (payload["data"]["channel"], payload["data"]["status"]) == ("sms", "reached")
    finally:
        receiver.stop()
