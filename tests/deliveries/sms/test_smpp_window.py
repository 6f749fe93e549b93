"""A batch of SMS keeps a window of submit_sm outstanding on the bind, against a real SMSC
peer that answers each submit late: many submits in flight, answers matched by sequence
number, one person's messages still one after the other, 0x58 still slowing the bind,
and a bind lost mid-window leaving exactly the unanswered ones to retry."""

from __future__ import annotations

import threading
import time
import uuid
from datetime import timedelta
from itertools import pairwise

import pytest
from django.utils import timezone

from deliveries.channels.sms.smpp.encoding import decode
from deliveries.models import Delivery, DeliveryAttempt, DeliveryStatus
from deliveries.pipeline.attempt import deliveries_attempt
from notify.models import Category, Notification, Producer, Recipient
from preferences.gate import gate_seal
from tests.deliveries.sms.conftest import _close_open_deliveries

ANSWER_SECONDS = 0.05  # how long the SMSC takes to answer each submit_sm


@pytest.fixture
def window_env(transactional_db, demo_data, sms_settings, smsc, clean_breakers):
    """The bind up, the rate limits out of the way (these measure the window, not the
    pace), no receipts (they would only add traffic), the window at its default."""
    from deliveries.channels.sms.smpp.process import session_close, session_for_process

    settings = sms_settings
    settings.SMPP_WINDOW_SIZE = 10
    settings.SMPP_TPS = 1000.0
    settings.NOTIFY_PROVIDER_RATE_LIMITS = {
        **settings.NOTIFY_PROVIDER_RATE_LIMITS,
        "smpp": "1000:1000",
    }
    smsc.receipt_state = None
    session_close()  # the bind is made anew with these settings
    assert session_for_process().wait_bound(5), "the SMPP session did not bind"
    yield Category.objects.get(key="security.login_code")
    _close_open_deliveries()
    session_close()


def sms_event(category: Category, *, phone: str, code: str, recipient=None, at=None) -> Delivery:
    """A notification with one queued SMS delivery to `phone`, as routing makes them."""
    recipient = recipient or Recipient.objects.create(
        user_id=f"smsw-{uuid.uuid4()}", locale="en", phone=phone
    )
    at = at or timezone.now()
    notification = Notification.objects.create(
        producer=Producer.objects.get_or_create(name="sms-tests")[0],
        event_id=str(uuid.uuid4()),
        recipient=recipient,
        category=category,
        payload={"code": code},
        fingerprint="test",
        occurred_at=at,
        routed_at=timezone.now(),
    )
    now = timezone.now()
    return Delivery.objects.create(
        notification=notification,
        channel="sms",
        target=phone,
        queue=category.queue,
        next_attempt_at=now,
        deadline=now + timedelta(seconds=600),
        recipient_id=recipient.pk,
        occurred_at=at,
        gate_seal=gate_seal(notification_id=notification.pk, channel="sms", target=phone),
    )


def statuses(deliveries: list[Delivery]) -> list[str]:
    rows = dict(
        Delivery.objects.filter(pk__in=[d.pk for d in deliveries]).values_list("pk", "status")
    )
    return [rows[d.pk] for d in deliveries]


def text_of(submit) -> str:
    return decode(submit.short_message, submit.data_coding)


def test_a_batch_of_100_sms_to_a_slow_smsc_goes_out_in_under_2_s(window_env, smsc):
    smsc.submit_delay = ANSWER_SECONDS
    deliveries = [sms_event(window_env, phone=f"7990{n:07d}", code=f"{n:06d}") for n in range(100)]

    started = time.monotonic()
    deliveries_attempt(delivery_ids=[d.pk for d in deliveries])
    elapsed = time.monotonic() - started

    one_at_a_time = len(deliveries) * ANSWER_SECONDS
    assert elapsed < 2.0, (
        f"100 SMS took {elapsed:.2f} s; waiting for each submit_sm_resp they take at least "
        f"{one_at_a_time:.0f} s (100 x {ANSWER_SECONDS * 1000:.0f} ms)"
    )
    assert statuses(deliveries) == ["delivered"] * 100
    # Each answer went to its own submit: the message id the SMSC gave that text.
    by_destination = {s.destination_addr: s for s in smsc.accepted()}
    for n, delivery in enumerate(deliveries):
        delivery.refresh_from_db()
        submit = by_destination[f"7990{n:07d}"]
        assert text_of(submit) == f"Your login code: {n:06d}"
        assert delivery.provider_message_id == submit.message_id
    assert 1 < smsc.most_outstanding <= 10  # a window, and never wider than the setting
    print(
        f"100 SMS at {ANSWER_SECONDS * 1000:.0f} ms each: {elapsed:.2f} s "
        f"(one at a time: >= {one_at_a_time:.0f} s)"
    )


def test_one_persons_sms_in_a_batch_go_in_order_each_after_the_last_was_answered(window_env, smsc):
    smsc.submit_delay = ANSWER_SECONDS
    phone = "79991112233"
    person = Recipient.objects.create(user_id=f"smsw-{uuid.uuid4()}", locale="en", phone=phone)
    now = timezone.now()
    hers = [
        sms_event(
            window_env,
            phone=phone,
            code=f"00000{n}",
            recipient=person,
            at=now - timedelta(minutes=4 - n),
        )
        for n in range(4)
    ]
    others = [sms_event(window_env, phone=f"7991{n:07d}", code="111111") for n in range(12)]

    deliveries_attempt(delivery_ids=[d.pk for d in [*reversed(hers), *others]])

    assert statuses(hers + others) == ["delivered"] * 16
    mine = [s for s in smsc.accepted() if s.destination_addr == phone]
    assert [text_of(s) for s in mine] == [f"Your login code: 00000{n}" for n in range(4)]
    # Each of hers reached the SMSC only after the answer to the one before.
    assert all(b.at - a.at >= ANSWER_SECONDS * 0.9 for a, b in pairwise(mine))
    assert smsc.most_outstanding > 1  # the others overlapped


def test_throttling_inside_the_window_slows_the_bind_and_every_sms_still_goes(
    window_env, smsc, settings
):
    from deliveries.channels.sms.smpp.process import session_for_process

    smsc.submit_delay = ANSWER_SECONDS
    settings.SMPP_THROTTLE_PAUSE = 0.05
    smsc.answer_next(0x58, 0x58, 0x58, 0x58)  # ESME_RTHROTTLED for the first four submits
    deliveries = [sms_event(window_env, phone=f"7992{n:07d}", code="222222") for n in range(10)]

    deliveries_attempt(delivery_ids=[d.pk for d in deliveries])

    assert statuses(deliveries) == ["delivered"] * 10
    assert len(smsc.accepted()) == 10
    # Sustained 0x58 (three within the window) halved the bind's rate, as one at a time.
    assert session_for_process().rate.rate <= 500.0
    notes = DeliveryAttempt.objects.filter(delivery__in=deliveries, response__contains="throttled")
    assert notes.count() >= 1


def test_a_bind_lost_mid_window_leaves_exactly_the_unanswered_sms_to_retry(
    window_env, smsc, settings
):
    settings.NOTIFY_BATCH_ROUND_START = 20  # one round: a full window when the bind goes
    smsc.submit_delay = 0.4
    deliveries = [sms_event(window_env, phone=f"7993{n:07d}", code="333333") for n in range(20)]
    done = threading.Event()

    def cut_while_a_window_waits() -> None:
        # As soon as the SMSC holds unanswered submits (each answered 0.4 s after it is
        # read), not at a fixed moment: on a loaded box the round may start later than
        # any fixed delay, and a cut before the first submit leaves nothing in flight.
        while not done.wait(0.005):
            if smsc.outstanding:
                smsc.drop_connections()
                return

    cut = threading.Thread(target=cut_while_a_window_waits, daemon=True)
    cut.start()
    try:
        deliveries_attempt(delivery_ids=[d.pk for d in deliveries])
    finally:
        done.set()
        cut.join(5)

    rows = list(Delivery.objects.filter(pk__in=[d.pk for d in deliveries]))
    delivered = [row for row in rows if row.status == DeliveryStatus.DELIVERED]
    retrying = [row for row in rows if row.status == DeliveryStatus.RETRYING]
    assert len(delivered) + len(retrying) == 20
    assert retrying, "the submits in flight when the bind was cut were not left to retry"
    for row in retrying:
        attempt = DeliveryAttempt.objects.get(delivery=row)
        assert (attempt.outcome, attempt.status_code) == ("transient", "smpp_unbound")
    # Delivered means answered: every delivered one has the message id its answer gave,
    # and no answered submit is left to be sent twice.
    answered = {s.message_id for s in smsc.accepted()}
    assert {row.provider_message_id for row in delivered} == answered
    # What the SMSC read but never answered is among those left to retry.
    unanswered = [s for s in smsc.submits if not s.answered]
    assert 0 < len(unanswered) <= len(retrying)
