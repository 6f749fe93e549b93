"""Push: devices, Web Push, FCM and the live stream."""

from notify.env import (
    env_float,
    env_int,
    env_list,
    env_str,
    secret_text,
)

# --- Push: devices, Web Push, FCM, the live stream -----------------------------------------
# VAPID private key (PEM text or a path to it) and the contact the push services see.
WEBPUSH_VAPID_PRIVATE_KEY = secret_text("WEBPUSH_VAPID_PRIVATE_KEY").strip()
WEBPUSH_VAPID_SUBJECT = env_str("WEBPUSH_VAPID_SUBJECT", "mailto:ops@notify.localhost")
# A signed VAPID JWT is reused for this long (push services accept up to 24 h).
WEBPUSH_VAPID_JWT_LIFETIME = env_int("WEBPUSH_VAPID_JWT_LIFETIME", 12 * 3600, minimum=60)
# Push endpoints are given to us by browsers (i.e. by anyone): we post only to these
# origins (`scheme://host[:port]`, `*.` for any subdomain), so a registration cannot aim
# our workers at internal hosts. An address that resolves to loopback, private or
# link-local space is refused unless its origin is listed exactly (a local push peer).
WEBPUSH_ALLOWED_ORIGINS = env_list(
    "WEBPUSH_ALLOWED_ORIGINS",
    [
        "https://fcm.googleapis.com",  # Chrome, Edge (Chromium), Opera
        "https://updates.push.services.mozilla.com",  # Firefox
        "https://*.notify.windows.com",  # legacy Edge / Windows
        "https://web.push.apple.com",  # Safari
        "https://*.push.apple.com",
    ],
)
# Only this much of a push service's answer is read (it lands in last_error).
WEBPUSH_MAX_RESPONSE_BYTES = env_int("WEBPUSH_MAX_RESPONSE_BYTES", 4096, minimum=64)
# A provider's Retry-After is believed up to this many seconds (the longest TTL, 28 days):
# a huge value would overflow the date arithmetic; past the deadline the push expires.
NOTIFY_PUSH_RETRY_AFTER_MAX = env_float("NOTIFY_PUSH_RETRY_AFTER_MAX", 28 * 24 * 3600.0, minimum=1)
# Largest clear-text payload one aes128gcm record can carry (4096 - 103 bytes overhead).
WEBPUSH_MAX_PAYLOAD_BYTES = env_int("WEBPUSH_MAX_PAYLOAD_BYTES", 3993, minimum=64)
# Path to a service-account JSON for FCM; empty disables the channel.
FCM_CREDENTIALS = env_str("FCM_CREDENTIALS", "")
# Override of FCM's send URL ({project_id} is filled in): an emulator or a test peer.
FCM_SEND_URL = env_str("FCM_SEND_URL", "")
# FCM deliveries per send message and per send_each call (FCM allows at most 500).
NOTIFY_FCM_BATCH_SIZE = env_int("NOTIFY_FCM_BATCH_SIZE", 500, minimum=1)
# Push retry policy: base doubling per attempt up to the ceiling, jittered; the
# provider's Retry-After wins when longer; the notification's TTL is the deadline.
NOTIFY_PUSH_RETRY_BASE = env_float("NOTIFY_PUSH_RETRY_BASE", 30.0, minimum=0.01)
NOTIFY_PUSH_RETRY_MAX = env_float("NOTIFY_PUSH_RETRY_MAX", 3600.0, minimum=0.01)
# Provider call timeouts: vendors answer in seconds; these cap a stuck sender.
NOTIFY_PUSH_CONNECT_TIMEOUT = env_float("NOTIFY_PUSH_CONNECT_TIMEOUT", 3.0, minimum=0.1)
NOTIFY_PUSH_REQUEST_TIMEOUT = env_float("NOTIFY_PUSH_REQUEST_TIMEOUT", 5.0, minimum=0.1)
# The timeouts above are per read: a peer that drips a byte at a time never trips them.
# Every provider call also has a total deadline (seconds, NOTIFY_CALL_DEADLINE_<PROVIDER>):
# past it the call is cut off and ends as a transient failure (a timeout). SMPP needs
# none: its submits wait at most SMPP_RESPONSE_TIMEOUT for the answer on the bind.
NOTIFY_PROVIDER_CALL_DEADLINES = {
    provider: env_float(f"NOTIFY_CALL_DEADLINE_{provider.upper()}", default, minimum=0.1)
    for provider, default in {"webpush": 10.0, "fcm": 10.0, "smtp": 30.0}.items()
}
# A kept connection to a push service idle longer than this (seconds) is replaced before
# the next push goes on it: idle is where a half-dead connection hides (a NAT or load
# balancer dropped it without a close), and a push sent on one waits out its deadline.
NOTIFY_PUSH_KEPT_IDLE_MAX = env_float("NOTIFY_PUSH_KEPT_IDLE_MAX", 60.0, minimum=0)
# Only this much of an FCM answer is read (its error bodies are well under 2 KiB).
NOTIFY_FCM_MAX_RESPONSE_BYTES = env_int("NOTIFY_FCM_MAX_RESPONSE_BYTES", 16384, minimum=1024)
# Web Push and FCM senders per worker process (each; see channel isolation in channels.py).
NOTIFY_PUSH_SENDERS = env_int("NOTIFY_PUSH_SENDERS", 8, minimum=1)
# Web Push posts one sender keeps in flight at once within a batch (each with its own
# deadline; one person's pushes still go one after the other). At 50 ms a push service
# answer, 16 make a batch of 200 about 0.7 s of waiting instead of 10 s. The process
# keeps this many times NOTIFY_PUSH_SENDERS connections per push host.
NOTIFY_WEBPUSH_CONCURRENCY = env_int("NOTIFY_WEBPUSH_CONCURRENCY", 16, minimum=1)
# At most this many active devices (browsers and apps together) per person. Registering
# one more deactivates the one registered (or registered again) least recently, as a
# dead token is deactivated (its row and history stay), so no caller can make one person
# a fan-out of hundreds of pushes.
NOTIFY_DEVICES_PER_RECIPIENT = env_int("NOTIFY_DEVICES_PER_RECIPIENT", 20, minimum=1)
# Live stream: heartbeat comment interval and how long a device counts as live
# without a heartbeat (seconds). A stream is woken by Redis pub/sub when an entry is
# written; it also reads the feed every NOTIFY_STREAM_SAFETY_POLL (a lost wake-up costs
# at most that), and every NOTIFY_STREAM_POLL_INTERVAL while Redis is unreachable.
NOTIFY_STREAM_HEARTBEAT = env_float("NOTIFY_STREAM_HEARTBEAT", 15.0, minimum=0.1)
NOTIFY_LIVE_TTL = env_int("NOTIFY_LIVE_TTL", 45, minimum=1)
NOTIFY_STREAM_SAFETY_POLL = env_float("NOTIFY_STREAM_SAFETY_POLL", 15.0, minimum=0.1)
NOTIFY_STREAM_POLL_INTERVAL = env_float("NOTIFY_STREAM_POLL_INTERVAL", 1.0, minimum=0.05)
# How many missed entries a reconnect with Last-Event-ID replays at most.
NOTIFY_STREAM_REPLAY_MAX = env_int("NOTIFY_STREAM_REPLAY_MAX", 100, minimum=1)
# Open streams allowed at once per user and per API key; the next one gets 429.
NOTIFY_STREAM_MAX_PER_USER = env_int("NOTIFY_STREAM_MAX_PER_USER", 5, minimum=1)
NOTIFY_STREAM_MAX_PER_KEY = env_int("NOTIFY_STREAM_MAX_PER_KEY", 1000, minimum=1)
# A stream ends after this long (seconds, shortened by up to the jitter fraction); the
# client reconnects and is authenticated again, so a revoked key stops streaming.
NOTIFY_STREAM_MAX_LIFETIME = env_float("NOTIFY_STREAM_MAX_LIFETIME", 3600.0, minimum=1)
# The SSE `retry:` reconnect advice (milliseconds), spread by ±the jitter fraction.
NOTIFY_STREAM_RETRY_MS = env_int("NOTIFY_STREAM_RETRY_MS", 3000, minimum=1)
NOTIFY_STREAM_RETRY_JITTER = env_float("NOTIFY_STREAM_RETRY_JITTER", 0.5, minimum=0)
# Connections in the one Redis pool a web process's streams share (each open stream
# holds one for its pub/sub); past it a stream falls back to polling the database.
NOTIFY_STREAM_REDIS_MAX_CONNECTIONS = env_int(
    "NOTIFY_STREAM_REDIS_MAX_CONNECTIONS", 1000, minimum=2
)
# A push is skipped for a live device only when the notification's feed entry was
# written to that device's stream: the stream remembers what it wrote for this long
# (seconds), and the push sender waits at most NOTIFY_LIVE_SEEN_WAIT (seconds) for the
# stream to write an entry that exists but is not out yet; after that it pushes.
NOTIFY_LIVE_SEEN_TTL = env_int("NOTIFY_LIVE_SEEN_TTL", 3600, minimum=1)
NOTIFY_LIVE_SEEN_WAIT = env_float("NOTIFY_LIVE_SEEN_WAIT", 2.0, minimum=0.0)
