"""SMS over SMPP."""

from django.core.exceptions import ImproperlyConfigured

from notify.env import (
    env_float,
    env_int,
    env_str,
    secret_text,
)

# --- SMS over SMPP -------------------------------------------------------------------------
# The SMSC and our account there (DESIGN.md §12 names). One bind_transceiver per sender
# process; its deliver_sm receipts arrive on the same bind.
SMPP_HOST = env_str("SMPP_HOST", "127.0.0.1")
SMPP_PORT = env_int("SMPP_PORT", 2775, minimum=1)
SMPP_SYSTEM_ID = env_str("SMPP_SYSTEM_ID", "notify")
SMPP_PASSWORD = secret_text("SMPP_PASSWORD").strip()
SMPP_SYSTEM_TYPE = env_str("SMPP_SYSTEM_TYPE", "")
# A second SMSC bind, for failover (NOTIFY_SMS_PROVIDERS=smpp,smpp2): its own SMSC and
# account; everything else (window, rate, keep-alive, encoding) is the first one's.
SMPP2_HOST = env_str("SMPP2_HOST", "127.0.0.1")
SMPP2_PORT = env_int("SMPP2_PORT", 2775, minimum=1)
SMPP2_SYSTEM_ID = env_str("SMPP2_SYSTEM_ID", "notify")
SMPP2_PASSWORD = secret_text("SMPP2_PASSWORD").strip()
# The sender id the phone shows (an alphanumeric name or a number).
SMPP_SOURCE_ADDR = env_str("SMPP_SOURCE_ADDR", "Notify")
# Keep-alive: SMSCs drop a bind after ~120 s without a PDU; 30-60 s is the working range.
SMPP_ENQUIRE_LINK_INTERVAL = env_float("SMPP_ENQUIRE_LINK_INTERVAL", 45.0, minimum=0.1)
# How long we wait for any *_resp (bind, submit, enquire_link) before the bind is suspect.
SMPP_RESPONSE_TIMEOUT = env_float("SMPP_RESPONSE_TIMEOUT", 10.0, minimum=0.1)
# A send waits this long for the bind to come (back) up before it is a transient failure.
SMPP_BIND_WAIT = env_float("SMPP_BIND_WAIT", 5.0, minimum=0)
# Reconnect backoff after a lost or refused bind: base doubling to the ceiling, jittered.
SMPP_RECONNECT_BASE = env_float("SMPP_RECONNECT_BASE", 1.0, minimum=0.01)
SMPP_RECONNECT_MAX = env_float("SMPP_RECONNECT_MAX", 60.0, minimum=0.01)
# Unacknowledged submit_sm per bind (window) and submits per second per bind (TPS). With
# several sender processes, per-bind TPS times binds must stay within the account's TPS.
# A batch of SMS keeps up to a window of submits outstanding instead of waiting for each
# submit_sm_resp (one person's messages still one after the other).
SMPP_WINDOW_SIZE = env_int("SMPP_WINDOW_SIZE", 10, minimum=1)
SMPP_TPS = env_float("SMPP_TPS", 30.0, minimum=0.01)
# Throttling (0x58): pause base doubling to the ceiling, ± jitter, this many retries
# inside one send; then the delivery is dead.
SMPP_THROTTLE_PAUSE = env_float("SMPP_THROTTLE_PAUSE", 0.1, minimum=0)
SMPP_THROTTLE_PAUSE_MAX = env_float("SMPP_THROTTLE_PAUSE_MAX", 5.0, minimum=0)
SMPP_THROTTLE_JITTER = env_float("SMPP_THROTTLE_JITTER", 0.2, minimum=0)
SMPP_THROTTLE_RETRIES = env_int("SMPP_THROTTLE_RETRIES", 3, minimum=0)
# Sustained throttling (this many 0x58 within the window) halves the bind's rate, at most
# once per step interval, never below the floor; after a quiet period without 0x58 the
# rate climbs back by a fraction of SMPP_TPS per step interval (no see-saw).
SMPP_THROTTLE_SUSTAINED_COUNT = env_int("SMPP_THROTTLE_SUSTAINED_COUNT", 3, minimum=1)
SMPP_THROTTLE_SUSTAINED_WINDOW = env_float("SMPP_THROTTLE_SUSTAINED_WINDOW", 10.0, minimum=0.01)
SMPP_RATE_STEP_INTERVAL = env_float("SMPP_RATE_STEP_INTERVAL", 5.0, minimum=0.01)
SMPP_RATE_RECOVER_AFTER = env_float("SMPP_RATE_RECOVER_AFTER", 30.0, minimum=0.01)
SMPP_RATE_RECOVER_STEP = env_float("SMPP_RATE_RECOVER_STEP", 0.1, minimum=0.01)
SMPP_RATE_FLOOR = env_float("SMPP_RATE_FLOOR", 1.0, minimum=0.01)
# Long text: "udh" (concatenated parts with a user data header, the most widely
# supported) or "payload" (one submit_sm with the message_payload TLV).
SMPP_LONG_MESSAGE_MODE = env_str("SMPP_LONG_MESSAGE_MODE", "udh")
if SMPP_LONG_MESSAGE_MODE not in ("udh", "payload"):
    raise ImproperlyConfigured(
        f"SMPP_LONG_MESSAGE_MODE must be 'udh' or 'payload', not {SMPP_LONG_MESSAGE_MODE!r}"
    )
# Segment sizes (GSM 03.38 / 03.40): one part, and each part of a concatenated message.
SMPP_GSM7_SINGLE_CHARS = env_int("SMPP_GSM7_SINGLE_CHARS", 160, minimum=1)
SMPP_GSM7_PART_CHARS = env_int("SMPP_GSM7_PART_CHARS", 153, minimum=1)
SMPP_UCS2_SINGLE_CHARS = env_int("SMPP_UCS2_SINGLE_CHARS", 70, minimum=1)
SMPP_UCS2_PART_CHARS = env_int("SMPP_UCS2_PART_CHARS", 67, minimum=1)
# A receipt for a message id no delivery has yet (the send is still being recorded) is
# looked up again this many times, this far apart, before the SMSC is asked to resend it.
SMPP_DLR_MATCH_RETRIES = env_int("SMPP_DLR_MATCH_RETRIES", 5, minimum=0)
SMPP_DLR_MATCH_DELAY = env_float("SMPP_DLR_MATCH_DELAY", 0.2, minimum=0)
