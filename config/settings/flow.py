"""Flow control (flow/): each channel's share of a worker's senders and the line where a
send waits for one, the providers' circuit breakers, a person's push slots, and campaign
work yielding to login codes."""

import os
import socket
import tempfile

from config.settings.push import NOTIFY_PUSH_SENDERS
from notify.env import env_float, env_int, env_list, env_str

# --- Channel isolation: each channel's own share of a worker's senders -----------------
# (flow/senders.py, docs/pipeline.md.) A worker process's threads, as
# scripts/worker.sh gives them to Celery (it exports WORKER_CONCURRENCY).
NOTIFY_WORKER_THREADS = env_int("WORKER_CONCURRENCY", 8, minimum=1)
# On these queue classes at most this many of them send for one channel at once, and never
# more than half of them (rounded up), so every other channel keeps the rest. The push
# channels take NOTIFY_PUSH_SENDERS each (give the worker twice as many threads for all of
# them). On the other classes (`low`: a campaign's email is most of its work) a channel
# may use every thread while its provider is fast.
NOTIFY_CHANNEL_ISOLATED_QUEUES = env_list("NOTIFY_CHANNEL_ISOLATED_QUEUES", ["high", "medium"])
# On these queue classes the thread that routes a notification sends its email and SMS
# itself, at once, when the channel has a free sender there (no send message: one broker
# round trip less between routing and sending); otherwise it publishes them. `low` is left
# out: a campaign's route batches go to every sender thread through send messages.
NOTIFY_SEND_AT_ROUTE_QUEUES = env_list("NOTIFY_SEND_AT_ROUTE_QUEUES", ["high", "medium"])
# ...and only while a route batch has at most this many deliveries of the channel (a lone
# login code has one): a burst's bigger batches go to the senders by message, since sending
# them here would hold up the routing of what follows (and with it per-person order).
NOTIFY_SEND_AT_ROUTE_MAX = env_int("NOTIFY_SEND_AT_ROUTE_MAX", 1, minimum=0)
NOTIFY_CHANNEL_SENDERS = {
    "email": env_int("NOTIFY_EMAIL_SENDERS", 4, minimum=1),
    "sms": env_int("NOTIFY_SMS_SENDERS", 4, minimum=1),
    "webpush": NOTIFY_PUSH_SENDERS,
    "fcm": NOTIFY_PUSH_SENDERS,
}
# A channel is slow while its provider calls take longer than this on average (seconds),
# or one provider call has been running longer; while slow it has at most
# NOTIFY_CHANNEL_SLOW_SENDERS, on every class.
NOTIFY_CHANNEL_SLOW_SECONDS = env_float("NOTIFY_CHANNEL_SLOW_SECONDS", 3.0, minimum=0.01)
NOTIFY_CHANNEL_SLOW_SENDERS = env_int("NOTIFY_CHANNEL_SLOW_SENDERS", 2, minimum=1)
# A send that finds its channel's slots taken waits in the worker's memory, without a
# thread, for the next sender of its channel to run it: if the sends ahead of it should
# be done within NOTIFY_CHANNEL_WAIT_MAX seconds and fewer than NOTIFY_CHANNEL_WAITING_MAX
# wait (per channel and class). One that has waited longer goes back to the broker. A
# sender runs waiting sends for at most NOTIFY_CHANNEL_SERVE_MAX seconds, then acks its
# own message (far inside RabbitMQ's consumer timeout, 30 min).
NOTIFY_CHANNEL_WAIT_MAX = env_float("NOTIFY_CHANNEL_WAIT_MAX", 60.0, minimum=0)
NOTIFY_CHANNEL_WAITING_MAX = env_int("NOTIFY_CHANNEL_WAITING_MAX", 200, minimum=0)
NOTIFY_CHANNEL_SERVE_MAX = env_float("NOTIFY_CHANNEL_SERVE_MAX", 120.0, minimum=1)
# A send that cannot wait there is published again with a countdown of about its wait
# (behind the line and the sends deferred before it), at least NOTIFY_CHANNEL_DEFER and
# at most NOTIFY_CHANNEL_DEFER_MAX seconds: far inside RabbitMQ's consumer timeout (a
# countdown on a classic queue waits in the worker), and what a deferred send may wait
# beyond its turn once the provider is fast again.
NOTIFY_CHANNEL_DEFER = env_float("NOTIFY_CHANNEL_DEFER", 1.0, minimum=0.1)
NOTIFY_CHANNEL_DEFER_MAX = env_float("NOTIFY_CHANNEL_DEFER_MAX", 300.0, minimum=1)

# --- Circuit breakers: one per provider (flow/breaker.py) --------------------------------
# A provider's breaker opens after NOTIFY_BREAKER_FAILURES failures within
# NOTIFY_BREAKER_WINDOW seconds, and lets one probe through after NOTIFY_BREAKER_COOLDOWN.
NOTIFY_BREAKER_FAILURES = env_int("NOTIFY_BREAKER_FAILURES", 10, minimum=1)
NOTIFY_BREAKER_WINDOW = env_float("NOTIFY_BREAKER_WINDOW", 30.0, minimum=0.1)
NOTIFY_BREAKER_COOLDOWN = env_float("NOTIFY_BREAKER_COOLDOWN", 30.0, minimum=0.1)
# How long a half-open probe may take before another sender may probe instead.
NOTIFY_BREAKER_PROBE_TIMEOUT = env_float("NOTIFY_BREAKER_PROBE_TIMEOUT", 15.0, minimum=0.1)

# --- Push slots: a person's pushes queued and in flight (flow/fairness.py) ----------------
# At most this many push jobs per recipient queued + in flight (push fairness).
NOTIFY_PUSH_PER_RECIPIENT_LIMIT = env_int("NOTIFY_PUSH_PER_RECIPIENT_LIMIT", 4, minimum=1)
# Over the limit, a recipient's browsers take turns for the slots (the one served least
# recently goes first); each browser's last turn is remembered this long (seconds) after
# the recipient's last push, then the turns start again from the oldest device.
NOTIFY_PUSH_TURN_MEMORY_SECONDS = env_int(
    "NOTIFY_PUSH_TURN_MEMORY_SECONDS", 30 * 24 * 3600, minimum=60
)
# Dropped pushes are logged as one summed line at most this often (seconds).
NOTIFY_PUSH_DROP_LOG_INTERVAL = env_int("NOTIFY_PUSH_DROP_LOG_INTERVAL", 60, minimum=1)

# --- Campaign work yields to login codes (flow/priority.py, flow/campaign_statements.py) -
# Campaign work yields to login codes (flow/priority.py): a `low` task waits while a
# `high` notification was accepted or a `high` task started within the window (seconds;
# 0 turns it off), at most the max.
NOTIFY_CAMPAIGN_YIELD_WINDOW = env_float("NOTIFY_CAMPAIGN_YIELD_WINDOW", 0.2, minimum=0)
NOTIFY_CAMPAIGN_YIELD_MAX = env_float("NOTIFY_CAMPAIGN_YIELD_MAX", 0.5, minimum=0)
# Inside a campaign batch, the yield is looked at again at most this often (seconds)
# between two provider calls, as it is between two tasks.
NOTIFY_CAMPAIGN_YIELD_CHECK = env_float("NOTIFY_CAMPAIGN_YIELD_CHECK", 0.05, minimum=0)
# While high work outlasts that wait, this many campaign tasks run at a time on the host
# (in all low workers of one NOTIFY_CAMPAIGN_YIELD_SCOPE; each waits for its turn at most
# NOTIFY_CAMPAIGN_YIELD_MAX again).
NOTIFY_CAMPAIGN_YIELD_CONCURRENCY = env_int("NOTIFY_CAMPAIGN_YIELD_CONCURRENCY", 1, minimum=1)
# ...and take at most this share of the time: a turn held t seconds leaves its slot
# resting t * (1 - share) / share seconds (at most NOTIFY_CAMPAIGN_YIELD_MAX); 1 turns the
# rest off. Idle CPU is what keeps a login code fast on a busy host.
NOTIFY_CAMPAIGN_YIELD_SHARE = env_float("NOTIFY_CAMPAIGN_YIELD_SHARE", 0.5, minimum=0.01)
# The low workers of one NOTIFY_CAMPAIGN_YIELD_SCOPE run at most this many database
# statements at once (one per CPU unless set; 0: no limit; flow/campaign_statements.py):
# more only queue for the database's CPUs, and a login code arriving then waits behind
# all of them. While login codes are in flight, at most the busy number (half the CPUs
# unless set). A statement waits at most NOTIFY_CAMPAIGN_DB_WAIT seconds for its slot,
# then runs anyway. The slots are lock files in NOTIFY_CAMPAIGN_DB_LOCK_DIR: containers
# sharing CPUs share it (a volume).
NOTIFY_CAMPAIGN_DB_CONCURRENCY = env_int(
    "NOTIFY_CAMPAIGN_DB_CONCURRENCY", os.cpu_count() or 1, minimum=0
)
NOTIFY_CAMPAIGN_DB_BUSY_CONCURRENCY = env_int(
    "NOTIFY_CAMPAIGN_DB_BUSY_CONCURRENCY", max(1, (os.cpu_count() or 1) // 2), minimum=1
)
NOTIFY_CAMPAIGN_DB_WAIT = env_float("NOTIFY_CAMPAIGN_DB_WAIT", 0.5, minimum=0)
NOTIFY_CAMPAIGN_DB_LOCK_DIR = env_str("NOTIFY_CAMPAIGN_DB_LOCK_DIR", tempfile.gettempdir())
# Which processes share the CPU (and so yield to each other): the host name by default;
# containers on one machine set one value for all.
NOTIFY_CAMPAIGN_YIELD_SCOPE = env_str("NOTIFY_CAMPAIGN_YIELD_SCOPE", socket.gethostname())
