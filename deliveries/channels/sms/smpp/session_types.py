"""What an SMPP session is configured with, answers and raises."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from deliveries.channels.sms.smpp.codes import ESME_ROK


class SessionUnavailable(Exception):
    """No usable bind right now (not bound, bind lost, window full): a transient failure."""


class AnswerLost(SessionUnavailable):
    """The bind was lost after the submit_sm went out, before its answer: the SMSC may
    have taken it (an unknown outcome)."""


class SubmitTimeout(Exception):
    """The SMSC did not answer a submit_sm in time; it may or may not have taken it."""


@dataclass(frozen=True)
class SubmitAnswer:
    status: int
    message_id: str


@dataclass
class _Pending:
    done: threading.Event = field(default_factory=threading.Event)
    status: int = ESME_ROK
    message_id: str = ""
    lost: bool = False


@dataclass(frozen=True)
class SessionConfig:
    host: str
    port: int
    system_id: str
    password: str
    system_type: str = ""
    window: int = 10
    enquire_interval: float = 45.0
    response_timeout: float = 10.0
    bind_wait: float = 5.0
    reconnect_base: float = 1.0
    reconnect_max: float = 60.0
