"""The persistent bind against the local SMSC: keep-alive, re-bind, and every status."""

from __future__ import annotations

import itertools
import socket

import pytest

from deliveries.channels.sms.channel import submit_text
from deliveries.channels.sms.smpp.codes import STATUS_TABLE, StatusKind
from deliveries.channels.sms.smpp.encoding import encode_text
from deliveries.channels.sms.smpp.process import session_for_process
from deliveries.models import AttemptOutcome
from tests.waiting import wait_for

PHONE = "+447700900123"


def test_the_process_keeps_one_session_and_reuses_it(sms_session, smsc):
    port = sms_session.local_address[1]
    assert session_for_process() is sms_session
    submit_text(sms_session, destination=PHONE, encoded=encode_text("one"))
    submit_text(sms_session, destination=PHONE, encoded=encode_text("two"))
    assert sms_session.binds == 1
    assert sms_session.local_address[1] == port  # the same TCP connection throughout


def test_the_bind_survives_idle_time_with_enquire_link_seen_by_the_smsc(sms_session, smsc):
    port = sms_session.local_address[1]
    # Scaled down: SMPP_ENQUIRE_LINK_INTERVAL is 1 s here (45 s by default) and this SMSC
    # hangs up on a connection silent for 2 s (real ones: ~120 s). Idle for more than
    # three such timeouts, the bind must still be the first one.
    smsc.idle_timeout = 2.0

    def eight_links():
        links = smsc.enquire_links_by_port.get(port, [])
        return links[:8] if len(links) >= 8 else None

    links = wait_for(eight_links, what="eight enquire_link from our idle bind", timeout=15)
    # Spaced by the interval (1 s), not a burst. The SMSC stamps each when it reads it, and
    # one read delayed on a loaded machine shortens the next gap: each gap is held to half
    # the interval (a burst is milliseconds), their mean to nearly all of it.
    gaps = [b - a for a, b in itertools.pairwise(links)]
    assert min(gaps) >= 0.5, gaps
    assert sum(gaps) / len(gaps) >= 0.9, gaps
    assert links[-1] - links[0] > 3 * smsc.idle_timeout
    assert smsc.idle_drops == 0
    assert sms_session.bound and sms_session.binds == 1
    result = submit_text(sms_session, destination=PHONE, encoded=encode_text("still here"))
    assert result.outcome == AttemptOutcome.DELIVERED
    assert sms_session.local_address[1] == port  # the same bind carried it


def test_a_lost_bind_is_bound_again_and_the_next_sms_goes_out(sms_session, smsc):
    smsc.drop_connections()
    wait_for(lambda: sms_session.binds == 2, what="a second bind after the connection was cut")

    result = submit_text(sms_session, destination=PHONE, encoded=encode_text("after the cut"))
    assert result.outcome == AttemptOutcome.DELIVERED


def test_an_smsc_that_is_down_makes_the_sms_transient_not_lost(sms_settings, smsc):
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        sms_settings.SMPP_PORT = probe.getsockname()[1]
    sms_settings.SMPP_BIND_WAIT = 0.5

    result = submit_text(session_for_process(), destination=PHONE, encoded=encode_text("hi"))
    assert result.outcome == AttemptOutcome.TRANSIENT
    assert result.status_code == "smpp_unbound"


def test_a_wrong_password_is_refused_and_reported_as_transient(sms_settings, smsc):
    sms_settings.SMPP_PASSWORD = "wrong"
    sms_settings.SMPP_BIND_WAIT = 0.5

    result = submit_text(session_for_process(), destination=PHONE, encoded=encode_text("hi"))
    assert result.outcome == AttemptOutcome.TRANSIENT
    assert smsc.refused_binds >= 1


def test_the_session_keeps_trying_and_binds_once_the_smsc_accepts_again(sms_settings, smsc):
    smsc.password = "rotated"  # the SMSC refuses our bind for now
    try:
        session = session_for_process()
        wait_for(lambda: smsc.refused_binds >= 3, what="repeated bind attempts with backoff")
        assert not session.bound
        smsc.password = "s3cret"
        assert session.wait_bound(5)
    finally:
        smsc.password = "s3cret"
    result = submit_text(session, destination=PHONE, encoded=encode_text("back"))
    assert result.outcome == AttemptOutcome.DELIVERED


_ROWS = sorted(
    (code, info) for code, info in STATUS_TABLE.items() if info.kind is not StatusKind.THROTTLED
)


@pytest.mark.parametrize(
    ("code", "info"), _ROWS, ids=[f"0x{code:02X}-{info.name}" for code, info in _ROWS]
)
def test_each_smsc_answer_is_classified_as_the_table_says(sms_session, smsc, code, info):
    smsc.always = code
    result = submit_text(sms_session, destination=PHONE, encoded=encode_text("status"))

    expected = {
        StatusKind.OK: AttemptOutcome.DELIVERED,
        StatusKind.TRANSIENT: AttemptOutcome.TRANSIENT,
        StatusKind.PERMANENT: AttemptOutcome.PERMANENT,
    }[info.kind]
    assert result.outcome == expected
    assert len(smsc.submits) == 1  # only throttling is retried inside the send
    if info.kind is not StatusKind.OK:
        assert result.status_code == f"0x{code:08X}"
        assert info.name in result.response


def test_the_throttling_row_is_retried_then_given_up(sms_session, smsc):
    from deliveries.channels.sms.channel import THROTTLE_EXHAUSTED, throttle_exhausted

    smsc.always = 0x58
    result = submit_text(sms_session, destination=PHONE, encoded=encode_text("throttled"))
    assert throttle_exhausted(result) and result.status_code == THROTTLE_EXHAUSTED
    assert len(smsc.submits) == 4


def test_an_answer_outside_the_table_is_retried_later(sms_session, smsc):
    smsc.always = 0x400  # vendor-specific
    result = submit_text(sms_session, destination=PHONE, encoded=encode_text("vendor"))
    assert result.outcome == AttemptOutcome.TRANSIENT
    assert result.status_code == "0x00000400"


def test_a_long_text_arrives_as_parts_the_phone_can_put_back_together(sms_session, smsc):
    text = "Your order 12345 has shipped. " * 12  # 360 GSM-7 characters
    result = submit_text(sms_session, destination=PHONE, encoded=encode_text(text))

    assert result.outcome == AttemptOutcome.DELIVERED
    parts = smsc.submits
    assert len(parts) == 3
    assert all(part.esm_class & 0x40 for part in parts)  # UDHI set
    assert result.provider_message_id.split() == [part.message_id for part in parts]
    headers = [part.short_message[:6] for part in parts]
    assert {h[:3] for h in headers} == {b"\x05\x00\x03"}
    assert len({h[3] for h in headers}) == 1  # one reference for all parts
    assert [(h[4], h[5]) for h in headers] == [(3, 1), (3, 2), (3, 3)]
    assert b"".join(part.short_message[6:] for part in parts).decode("ascii") == text


def test_a_long_text_in_payload_mode_is_one_submit_with_message_payload(
    sms_session, smsc, sms_settings
):
    sms_settings.SMPP_LONG_MESSAGE_MODE = "payload"
    text = "Доставка завтра. " * 10  # UCS-2, 170 characters: three parts' worth
    result = submit_text(sms_session, destination=PHONE, encoded=encode_text(text))

    assert result.outcome == AttemptOutcome.DELIVERED
    [submit] = smsc.submits
    assert submit.short_message == b""
    assert submit.data_coding == 0x08
    assert submit.message_payload.decode("utf-16-be") == text


def test_a_receipt_for_each_part_of_a_long_sms_finds_the_delivery(smsc, login_code, settings):
    from deliveries.models import DeliveryStatus
    from tests.deliveries.sms.conftest import route_and_send

    smsc.receipt_state = "UNDELIV"
    delivery = route_and_send(login_code("7" * 70))  # two UCS-2 parts, two message ids
    assert len(delivery.provider_message_id.split()) == 2

    def failed():
        delivery.refresh_from_db()
        return delivery.status == DeliveryStatus.FAILED

    wait_for(failed, what="a part's UNDELIV receipt to mark the delivery failed")
    for receipt in smsc.receipts.values():
        wait_for(lambda r=receipt: 0 in r.answers, what="every part's receipt acknowledged")
