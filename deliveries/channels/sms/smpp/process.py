"""The SMPP session of this process (one per bind: a second one only for failover,
NOTIFY_SMS_PROVIDERS): made on first use, reused, closed at exit.

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
_sessions: dict[str, SmppSession] = {}  # by bind: "smpp", and "smpp2" for failover
_owner_pid: int | None = None

# Each bind's own SMSC and account (the SMPP_* and SMPP2_* settings); the rest is shared.
_ACCOUNTS = {
    "smpp": ("SMPP_HOST", "SMPP_PORT", "SMPP_SYSTEM_ID", "SMPP_PASSWORD"),
    "smpp2": ("SMPP2_HOST", "SMPP2_PORT", "SMPP2_SYSTEM_ID", "SMPP2_PASSWORD"),
}


def session_from_settings(bind: str = "smpp") -> SmppSession:
    """A session built from the SMPP_* settings (SMPP2_* for the second bind's SMSC
    and account), not started."""
    host, port, system_id, password = (getattr(settings, name) for name in _ACCOUNTS[bind])
    config = SessionConfig(
        host=host,
        port=port,
        system_id=system_id,
        password=password,
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


def session_for_process(bind: str = "smpp") -> SmppSession:
    """This process's running session on `bind`, started on first call."""
    global _owner_pid
    with _lock:
        if _owner_pid != os.getpid():  # a forked child: its parent's sockets are not its own
            _sessions.clear()
            _owner_pid = os.getpid()
        session = _sessions.get(bind)
        if session is not None and not session.closed:
            return session
        session = _sessions[bind] = session_from_settings(bind)
        session.start()
        return session


def session_close() -> None:
    """Unbind and stop this process's sessions, if it has any (safe to call twice)."""
    with _lock:
        sessions = list(_sessions.values()) if _owner_pid == os.getpid() else []
        _sessions.clear()
    for session in sessions:
        session.close()


atexit.register(session_close)
try:  # a prefork child leaves through os._exit, past atexit: Celery's hook covers it
    from celery.signals import worker_process_shutdown

    worker_process_shutdown.connect(lambda **_: session_close(), weak=False)
except ImportError:  # pragma: no cover - celery is a dependency; kept import-safe
    pass
