"""An SMS notification sent over a real SMPP bind to a local SMSC, receipts included."""

from __future__ import annotations

import re
from itertools import pairwise

import pytest

from deliveries.channels import provider_for
from deliveries.channels.sms.smpp.encoding import DATA_CODING, UCS2, decode
from deliveries.models import Delivery, DeliveryAttempt, DeliveryStatus, Reason
from tests.deliveries.sms.conftest import route_and_send
from tests.waiting import wait_for


def test_sms_is_a_registered_channel():
    from deliveries.channels.sms import channel

    assert provider_for("sms") is channel


def test_login_code_sms_reaches_the_smsc_and_keeps_its_message_id(smsc, login_code):
    smsc.receipt_state = None  # no receipt: it would race this test to `reached`
    delivery = route_and_send(login_code("424242"))

    assert delivery.status == DeliveryStatus.DELIVERED
    [submit] = smsc.submits
    assert delivery.provider_message_id == submit.message_id != ""
    assert submit.destination_addr == "79990000000"
    assert submit.source_addr == "Notify"
    # The ru template is Cyrillic: UCS-2, and data_coding says so.
    assert submit.data_coding == DATA_CODING[UCS2]
    assert decode(submit.short_message, submit.data_coding) == "Код для входа: 424242"
    assert submit.registered_delivery & 0x01  # a receipt was asked for


def test_a_delivered_receipt_marks_the_sms_reached_and_tells_the_producer_once(
    smsc, login_code, settings
):
    """DELIVRD: the SMSC handed it to the phone. The delivery becomes `reached` and the
    producer's `delivery.reached` endpoint gets one event, though the SMSC sends the
    receipt twice (as it does when our acknowledgement was lost)."""
    from notify.models import Producer
    from webhooks.endpoints import endpoint_create
    from webhooks.models import WebhookEvent

    # The session's receipt thread reads the subscriptions afresh each time: a late receipt
    # of an earlier test must not leave it a cached "nobody subscribes" for this one.
    settings.NOTIFY_WEBHOOK_SUBSCRIPTION_CACHE_SECONDS = 0
    producer, _ = Producer.objects.get_or_create(name="sms-tests")
    wants = endpoint_create(
        producer=producer, url="https://hooks.example/a", event_types=["delivery.reached"]
    )
    smsc.receipt_copies = 2
    delivery = route_and_send(login_code())

    receipt = smsc.receipts[delivery.provider_message_id]
    wait_for(lambda: receipt.answers == [0, 0], what="both copies acknowledged with ESME_ROK")
    delivery.refresh_from_db()
    assert delivery.status == DeliveryStatus.REACHED
    assert delivery.last_error == ""
    [event] = WebhookEvent.objects.filter(event_type="delivery.reached")
    assert event.endpoint == wants
    assert event.payload["data"]["delivery_id"] == delivery.pk
    assert (event.payload["data"]["status"], event.payload["data"]["channel"]) == (
        "reached",
        "sms",
    )
    # Reported by the SMSC, whose receipt gives no time we can place (no time zone).
    assert event.payload["data"]["provider_occurred_at"] is None


def test_a_receipt_never_reopens_a_delivery_and_a_failed_part_fails_a_reached_one(smsc, login_code):
    """A long SMS's parts report one by one: the first DELIVRD makes it `reached`, a part
    reported failed after it still fails it, and a DELIVRD after that changes nothing."""
    from deliveries.channels.sms.smpp.receipts import Receipt, receipt_apply

    smsc.receipt_state = None  # the receipts are applied here, one at a time
    delivery = route_and_send(login_code())
    Delivery.objects.filter(pk=delivery.pk).update(provider_message_id="p1 p2 p3")

    def status_after(message_id: str, state: str) -> str:
        receipt_apply(receipt=Receipt(message_id, state, "", f"id:{message_id} stat:{state}"))
        delivery.refresh_from_db()
        return delivery.status

    assert status_after("p1", "DELIVRD") == DeliveryStatus.REACHED
    assert status_after("p1", "DELIVRD") == DeliveryStatus.REACHED
    assert status_after("p3", "UNDELIV") == DeliveryStatus.FAILED
    assert "stat:UNDELIV" in delivery.last_error
    assert status_after("p2", "DELIVRD") == DeliveryStatus.FAILED
    assert status_after("p2", "REJECTD") == DeliveryStatus.FAILED
    assert "stat:UNDELIV" in delivery.last_error  # the first failure's text is kept


@pytest.mark.parametrize("state", ["UNDELIV", "REJECTD", "EXPIRED"])
def test_a_failed_receipt_marks_the_sms_failed_with_the_receipt_text(smsc, login_code, state):
    smsc.receipt_state = state
    delivery = route_and_send(login_code())

    def failed():
        delivery.refresh_from_db()
        return delivery.status == DeliveryStatus.FAILED

    wait_for(failed, what=f"the {state} receipt to mark the delivery failed")
    assert delivery.reason == Reason.REJECTED
    assert f"stat:{state}" in delivery.last_error
    assert delivery.provider_message_id in delivery.last_error


def test_a_receipt_without_tlvs_is_read_from_its_text(smsc, login_code):
    smsc.receipt_tlvs = False
    smsc.receipt_state = "UNDELIV"
    delivery = route_and_send(login_code())

    def failed():
        delivery.refresh_from_db()
        return delivery.status == DeliveryStatus.FAILED

    wait_for(failed, what="the text-only receipt to mark the delivery failed")


def test_a_receipt_that_overtakes_the_recorded_send_is_applied_when_the_smsc_resends_it(
    smsc, login_code, sms_settings
):
    sms_settings.SMPP_DLR_MATCH_RETRIES = 0  # answer "try later" at the first miss
    smsc.receipt_state = "UNDELIV"
    smsc.resend_after = 0.3
    # The send stays uncommitted for 0.6 s; the receipt comes after 0.05 s.
    delivery = route_and_send(login_code(), hold=0.6)

    def failed():
        delivery.refresh_from_db()
        return delivery.status == DeliveryStatus.FAILED

    wait_for(failed, what="the resent receipt to mark the delivery failed")
    receipt = smsc.receipts[delivery.provider_message_id]
    assert receipt.answers[0] == 0x64  # ESME_RX_T_APPN: kept by the SMSC, not lost
    # The receipt is answered right after it is applied: the SMSC hears "OK" last.
    wait_for(lambda: receipt.answers[-1] == 0, what="the SMSC to hear the receipt was taken")


def test_smsc_throttling_3_of_4_submits_slows_down_retries_with_growing_pauses_and_delivers(
    smsc, login_code, sms_session, sms_settings
):
    smsc.answer_next(0x58, 0x58, 0x58)
    smsc.receipt_state = None  # no receipt: it would race this test to `reached`
    delivery = route_and_send(login_code())

    assert delivery.status == DeliveryStatus.DELIVERED
    assert [submit.status for submit in smsc.submits] == [0x58, 0x58, 0x58, 0]
    assert delivery.provider_message_id == smsc.submits[-1].message_id
    # The pauses chosen: 100, 200, 400 ms, each ± 20 % jitter (so each longer than the last).
    [attempt] = DeliveryAttempt.objects.filter(delivery=delivery)
    chosen = [int(ms) / 1000 for ms in re.findall(r"(\d+) ms", attempt.response)]
    jitter = sms_settings.SMPP_THROTTLE_JITTER
    assert len(chosen) == 3
    for pause, nominal in zip(chosen, (0.1, 0.2, 0.4), strict=True):
        assert nominal * (1 - jitter) - 0.001 <= pause <= nominal * (1 + jitter) + 0.001
    # And the SMSC really saw the submits spaced at least that far apart.
    gaps = [b.at - a.at for a, b in pairwise(smsc.submits)]
    assert all(gap >= pause - 0.002 for gap, pause in zip(gaps, chosen, strict=True))
    # Sustained throttling lowered this bind's sending rate by half.
    assert sms_session.rate.rate == sms_settings.SMPP_TPS / 2
    assert "throttled, 4 tries" in attempt.response


def test_throttling_on_every_try_gives_up_after_three_retries(smsc, login_code):
    from deliveries.channels.sms.channel import THROTTLE_EXHAUSTED

    smsc.always = 0x58
    delivery = route_and_send(login_code())

    assert [submit.status for submit in smsc.submits] == [0x58] * 4  # 1 try + 3 retries
    # The channel's own retries are spent: the delivery is dead, not retried.
    assert delivery.status == DeliveryStatus.DEAD
    assert delivery.reason == Reason.RETRIES_EXHAUSTED
    [attempt] = DeliveryAttempt.objects.filter(delivery=delivery)
    assert attempt.outcome == "transient"
    assert attempt.status_code == THROTTLE_EXHAUSTED
    assert "no retries left" in attempt.response


def test_a_long_sms_throttled_out_after_its_first_part_ends_dead_not_retried(smsc, login_code):
    from deliveries.channels.sms.channel import THROTTLE_EXHAUSTED

    # Cyrillic + 80 digits: two UCS-2 parts. Part 1 is accepted, part 2 throttled for good.
    smsc.answer_next(0, 0x58, 0x58, 0x58, 0x58)
    delivery = route_and_send(login_code("9" * 80))

    assert [submit.status for submit in smsc.submits] == [0, 0x58, 0x58, 0x58, 0x58]
    assert delivery.status == DeliveryStatus.DEAD
    assert delivery.reason == Reason.RETRIES_EXHAUSTED
    [attempt] = DeliveryAttempt.objects.filter(delivery=delivery)
    assert attempt.status_code == THROTTLE_EXHAUSTED
    assert f"after parts {smsc.submits[0].message_id} were accepted" in attempt.response


def test_an_invalid_destination_fails_the_sms_at_once(smsc, login_code):
    smsc.always = 0x0B
    delivery = route_and_send(login_code())

    assert delivery.status == DeliveryStatus.FAILED
    assert delivery.reason == Reason.REJECTED
    assert delivery.last_error.startswith("0x0000000B ESME_RINVDSTADR")
    assert len(smsc.submits) == 1


def test_an_invalid_number_is_suppressed_and_the_next_code_is_not_sent_to_it(smsc, login_code):
    from deliveries.models import AddressSuppression

    smsc.always = 0x0B
    first = route_and_send(login_code("111111"))
    assert first.status == DeliveryStatus.FAILED
    smsc.always = None

    [entry] = AddressSuppression.objects.all()
    assert (entry.channel, entry.address) == ("sms", "+79990000000")
    assert "ESME_RINVDSTADR" in entry.evidence
    later = route_and_send(login_code("222222"))
    assert (later.status, later.reason) == (DeliveryStatus.SUPPRESSED, Reason.ADDRESS_SUPPRESSED)
    assert len(smsc.submits) == 1  # only the first code reached the SMSC


def test_an_smsc_system_error_schedules_a_retry(smsc, login_code):
    smsc.always = 0x08
    delivery = route_and_send(login_code())

    assert delivery.status == DeliveryStatus.RETRYING
    assert delivery.last_error.startswith("0x00000008 ESME_RSYSERR")


def test_a_text_over_the_segment_limit_is_refused_before_the_smsc(smsc, login_code, settings):
    settings.NOTIFY_SMS_MAX_SEGMENTS = 1
    delivery = route_and_send(login_code("9" * 80))  # Cyrillic + 80 digits: two UCS-2 parts

    assert delivery.status == DeliveryStatus.FAILED
    assert "2 UCS-2 segments; the limit is 1" in delivery.last_error
    assert smsc.submits == []


def test_an_sms_throttled_to_death_falls_back_to_the_categorys_fallback_channel(
    smsc, sms_session, login_code_for_worker
):
    from notify.models import Category

    smtp = login_code_for_worker.smtp
    Category.objects.filter(key="security.login_code").update(fallback_channel="email")
    smsc.always = 0x58
    notification = login_code_for_worker.make("777111")
    sms = route_and_send(notification)
    assert sms.status == DeliveryStatus.DEAD

    mail = wait_for(lambda: smtp.received, what="the fallback email")[0]
    assert mail.rcpt_tos == ["demo-ru@example.com"]
    assert "777111" in mail.subject
    fallback = Delivery.objects.get(notification=notification, channel="email")
    wait_for(
        lambda: Delivery.objects.filter(pk=fallback.pk, status="delivered").exists(),
        what="the fallback to be recorded",
    )


def test_a_failed_receipt_tells_the_producer_by_status_webhook(smsc, login_code, settings):
    """The receipt that turns a delivered SMS failed writes its `delivery.failed` event
    for the producer's subscribed endpoint (one per endpoint; none for the others)."""
    from notify.models import Producer
    from webhooks.endpoints import endpoint_create
    from webhooks.models import WebhookEvent

    # The session's receipt thread reads the subscriptions afresh each time: a late receipt
    # of an earlier test must not leave it a cached "nobody subscribes" for this one.
    settings.NOTIFY_WEBHOOK_SUBSCRIPTION_CACHE_SECONDS = 0
    producer, _ = Producer.objects.get_or_create(name="sms-tests")
    wants = endpoint_create(
        producer=producer, url="https://hooks.example/a", event_types=["delivery.failed"]
    )
    endpoint_create(
        producer=producer, url="https://hooks.example/b", event_types=["delivery.delivered"]
    )
    smsc.receipt_state = "UNDELIV"
    delivery = route_and_send(login_code())

    def failed_events():
        return list(WebhookEvent.objects.filter(event_type="delivery.failed"))

    [event] = wait_for(failed_events, what="the delivery.failed event")
    assert event.endpoint == wants
    assert event.payload["type"] == "delivery.failed"
    assert event.payload["data"]["delivery_id"] == delivery.pk
    assert event.payload["data"]["status"] == "failed"
    assert event.payload["data"]["channel"] == "sms"
