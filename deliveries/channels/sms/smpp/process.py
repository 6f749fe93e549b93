"""The one SMPP session of this process: made on first use, reused, closed at exit.

A Celery prefork child binds on its first SMS and keeps the bind for its life; a
forked child never reuses its parent's socket (the owner pid is checked).
"""

from __future__ import annotations

import atexit
import os
import threading

from django.conf import settings

from deliveries.channels.sms.smpp.rate import AdaptiveRate
from deliveries.channels.sms.smpp.receipts import handle_deliver_sm
from deliveries.channels.sms.smpp.session import SessionConfig, SmppSession

_lock = threading.Lock()
_session: SmppSession | None = None
_owner_pid: int | None = None


def session_from_settings() -> SmppSession:
    """A session built from the SMPP_* settings (not started)."""
    config = SessionConfig(
        host=settings.SMPP_HOST,
        port=settings.SMPP_PORT,
        system_id=settings.SMPP_SYSTEM_ID,
        password=settings.SMPP_PASSWORD,
        system_type=settings.SMPP_SYSTEM_TYPE,
        window=settings.SMPP_WINDOW_SIZE,
        enquire_interval=settings.SMPP_ENQUIRE_LINK_INTERVAL,
        response_timeout=settings.SMPP_RESPONSE_TIMEOUT,
        bind_wait=settings.SMPP_BIND_WAIT,
        reconnect_base=settings.SMPP_RECONNECT_BASE,
        reconnect_max=settings.SMPP_RECONNECT_MAX,
    )
    rate = AdaptiveRate(
        ceiling=settings.SMPP_TPS,
        floor=settings.SMPP_RATE_FLOOR,
        sustained_count=settings.SMPP_THROTTLE_SUSTAINED_COUNT,
        sustained_window=settings.SMPP_THROTTLE_SUSTAINED_WINDOW,
        step_interval=settings.SMPP_RATE_STEP_INTERVAL,
        recover_after=settings.SMPP_RATE_RECOVER_AFTER,
        recover_step=settings.SMPP_RATE_RECOVER_STEP,
    )
    return SmppSession(config, rate=rate, receipt_handler=handle_deliver_sm)


def session_for_process() -> SmppSession:
    """This process's running session, started on first call."""
    global _session, _owner_pid
    with _lock:
        if _session is not None and _owner_pid == os.getpid() and not _session.closed:
            return _session
        _session = session_from_settings()
        _owner_pid = os.getpid()
        _session.start()
        return _session


def session_close() -> None:
    """Unbind and stop this process's session, if it has one (safe to call twice)."""
    global _session
    with _lock:
        session, _session = _session, None
    if session is not None and _owner_pid == os.getpid():
        session.close()


atexit.register(session_close)
try:  # a prefork child leaves through os._exit, past atexit: Celery's hook covers it
    from celery.signals import worker_process_shutdown

    worker_process_shutdown.connect(lambda **_: session_close(), weak=False)
except ImportError:  # pragma: no cover - celery is a dependency; kept import-safe
    pass
