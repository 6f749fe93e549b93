"""SMS over SMPP, on this process's persistent bind.

The rendered body is encoded GSM-7 or UCS-2 (data_coding set to match) and sent as
one submit_sm, or — when longer than one segment — as concatenated parts with a user
data header or whole in message_payload (SMPP_LONG_MESSAGE_MODE). Every part asks for
a delivery receipt (deliveries.channels.sms.smpp.receipts records them).

Classification is deliveries.channels.sms.smpp.codes.STATUS_TABLE. Throttling (0x58) is
handled here, inside the attempt: pause 100 ms doubling to 5 s with jitter, at most
SMPP_THROTTLE_RETRIES retries, each 0x58 also feeding the bind's adaptive rate. When
the retries run out the result is transient with status THROTTLE_EXHAUSTED, which per
the retry policy ends the delivery as dead (see `throttle_exhausted`).

A batch keeps up to SMPP_WINDOW_SIZE submits outstanding (`send_overlapped`) instead of
waiting for each submit_sm_resp before the next submit_sm; the bind's adaptive rate
paces them all, a 0x58 pauses only its own message (and lowers the rate when
sustained), and a bind lost mid-window fails the unanswered ones as transient, retried.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Hashable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from django.conf import settings

from deliveries.channels.base import SendResult
from deliveries.channels.overlap import call_pool, calls_overlapped
from deliveries.channels.sms.smpp.codes import StatusKind, classify_status, refused, status_code
from deliveries.channels.sms.smpp.encoding import (
    EncodedText,
    SegmentLimits,
    encode_text,
    submit_sm_fields,
)
from deliveries.channels.sms.smpp.process import session_for_process
from deliveries.channels.sms.smpp.rate import throttle_pause
from deliveries.channels.sms.smpp.session import (
    AnswerLost,
    SessionUnavailable,
    SmppSession,
    SubmitTimeout,
)
from templates_admin.rendering import render_version

if TYPE_CHECKING:
    from deliveries.models import Delivery
    from templates_admin.models import TemplateVersion

logger = logging.getLogger(__name__)

# The attempt's status code when 0x58 outlasted every in-send retry (dead-lettered).
THROTTLE_EXHAUSTED = "smpp_throttled_out"


def send(
    delivery: Delivery,
    version: TemplateVersion,
    context: dict[str, Any],
    *,
    via: str | None = None,
) -> SendResult:
    """Render the SMS text and submit it on this process's SMPP bind (`via`: that bind,
    `smpp` or `smpp2`, when SMS fails over between two)."""
    return sms_prepare(delivery, version, context, session=_bind(via))()


def send_overlapped(
    items: Sequence[tuple[Delivery, TemplateVersion, dict[str, Any]]],
    *,
    lanes: Sequence[Hashable],
    before_each: Callable[[], object] | None = None,
    via: str | None = None,
) -> Iterator[tuple[int, SendResult | Exception, float]]:
    """A batch's messages with up to SMPP_WINDOW_SIZE submit_sm outstanding on the bind
    (the bind matches each submit_sm_resp to its submit by sequence number); yields
    (index, result or exception, seconds) as each message is answered. Each message's
    parts go one after the other, and one person's messages too."""
    limit = settings.SMPP_WINDOW_SIZE
    pool = call_pool("smpp-submit", limit * settings.NOTIFY_WORKER_THREADS)
    session = _bind(via)

    def prepare(index: int) -> Callable[[], SendResult]:
        return sms_prepare(*items[index], session=session)

    return calls_overlapped(prepare, lanes=lanes, limit=limit, pool=pool, before_each=before_each)


def sms_prepare(
    delivery: Delivery,
    version: TemplateVersion,
    context: dict[str, Any],
    *,
    session: Callable[[], SmppSession],
) -> Callable[[], SendResult]:
    """Render and encode the text (here: a render error raises) and return the call
    that submits its parts on the bind (safe on any thread)."""
    text = render_version(version, context).body
    encoded = encode_text(text, limits=segment_limits())
    if encoded.segments == 0:
        empty = SendResult.permanent(status_code="empty", response="the SMS text is empty")
        return lambda: empty
    if encoded.segments > settings.NOTIFY_SMS_MAX_SEGMENTS:
        too_long = SendResult.permanent(
            status_code="too_long",
            response=f"{encoded.segments} {encoded.encoding} segments; the limit is "
            f"{settings.NOTIFY_SMS_MAX_SEGMENTS}",
        )
        return lambda: too_long
    return lambda: submit_text(session(), destination=delivery.target, encoded=encoded)


def _bind(via: str | None) -> Callable[[], SmppSession]:
    """The session getter of a bind (the first one unless `via` names another)."""
    if via is None or via == "smpp":
        return session_for_process
    return lambda: session_for_process(via)


def segment_limits() -> SegmentLimits:
    return SegmentLimits(
        gsm7_single=settings.SMPP_GSM7_SINGLE_CHARS,
        gsm7_part=settings.SMPP_GSM7_PART_CHARS,
        ucs2_single=settings.SMPP_UCS2_SINGLE_CHARS,
        ucs2_part=settings.SMPP_UCS2_PART_CHARS,
    )


def submit_text(session: SmppSession, *, destination: str, encoded: EncodedText) -> SendResult:
    """Submit every part; delivered with all their message ids, or the first failure."""
    message_ids: list[str] = []
    notes: list[str] = []
    throttle_budget = [settings.SMPP_THROTTLE_RETRIES]
    pdus = submit_sm_fields(
        source=settings.SMPP_SOURCE_ADDR,
        destination=destination,
        encoded=encoded,
        whole_in_payload=settings.SMPP_LONG_MESSAGE_MODE == "payload",
    )
    for fields in pdus:
        result = _submit_part(session, fields, throttle_budget, notes)
        if isinstance(result, SendResult):
            if message_ids:
                result = result.noted(f"after parts {' '.join(message_ids)} were accepted")
            return result
        message_ids.append(result)
    return SendResult.delivered(
        provider_message_id=" ".join(message_ids)[:255],
        status_code=status_code(0),
        response="; ".join([f"{encoded.segments} {encoded.encoding} segment(s)", *notes]),
    )


def _submit_part(
    session: SmppSession, fields: dict[str, Any], budget: list[int], notes: list[str]
) -> str | SendResult:
    """One part, with the throttle retries: its message id, or the classified failure."""
    tries = 0
    pauses: list[float] = []
    while True:
        tries += 1
        try:
            answer = session.submit(**fields)
        except AnswerLost as error:  # the submit went out; the SMSC may have taken it
            return SendResult.transient(status_code="smpp_unbound", response=str(error),
                                        unknown=True)  # fmt: skip
        except SessionUnavailable as error:
            return SendResult.transient(status_code="smpp_unbound", response=str(error))
        except SubmitTimeout as error:
            return SendResult.transient(
                status_code="smpp_timeout", response=str(error), unknown=True
            )
        info = classify_status(answer.status)
        if info.kind is StatusKind.OK:
            if session.rate.accepted():
                logger.info("SMPP: no throttling lately; rate raised to %.1f/s", session.rate.rate)
            if pauses:
                notes.append(_throttle_note(tries, pauses))
            return answer.message_id
        if info.kind is StatusKind.THROTTLED:
            if session.rate.throttled():
                logger.warning("SMPP: sustained throttling; rate lowered to %.1f/s",
                               session.rate.rate)  # fmt: skip
            if budget[0] <= 0:
                return SendResult.transient(
                    status_code=THROTTLE_EXHAUSTED,
                    response=f"{info.name} ({status_code(answer.status)}): "
                    + _throttle_note(tries, pauses)
                    + "; no retries left",
                    give_up=True,
                )
            budget[0] -= 1
            pause = throttle_pause(
                len(pauses) + 1,
                base=settings.SMPP_THROTTLE_PAUSE,
                ceiling=settings.SMPP_THROTTLE_PAUSE_MAX,
                jitter=settings.SMPP_THROTTLE_JITTER,
            )
            pauses.append(pause)
            time.sleep(pause)
            continue
        # Any other refusal says nothing about our pace: the rate is left as it is.
        return refused(answer.status)


def throttle_exhausted(result: SendResult) -> bool:
    """Whether a result is 0x58 outlasting the in-send retries (the delivery is dead)."""
    return result.give_up and result.status_code == THROTTLE_EXHAUSTED


def _throttle_note(tries: int, pauses: list[float]) -> str:
    waited = ", ".join(f"{pause * 1000:.0f} ms" for pause in pauses)
    return f"throttled, {tries} tries, paused {waited or 'never'}"
