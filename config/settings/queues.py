"""Celery on RabbitMQ (queues, priorities, acknowledgements, the broker cluster),
retries and per-recipient order."""

from django.core.exceptions import ImproperlyConfigured
from kombu import Exchange, Queue

from notify.env import (
    env_bool,
    env_float,
    env_float_list,
    env_int,
    env_list,
    env_str,
    env_url,
)


# --- Celery on RabbitMQ: queues, priorities, acknowledgements ------------------------------
def _broker_urls(name: str, default: str) -> str:
    """One broker URL, or the nodes of a RabbitMQ cluster as Celery's failover list (URLs
    separated by ";"); each is checked, so a typo in the third node stops the start too."""
    raw = env_str(name, default)
    urls = [url.strip() for url in raw.split(";") if url.strip()]
    if not urls:
        raise ImproperlyConfigured(f"{name} must name at least one broker URL")
    for position, url in enumerate(urls, start=1):
        # No variable has this name: env_url checks `url` and names the node in its error.
        env_url(f"{name} (node {position})", url, schemes=("amqp", "amqps"))
    return ";".join(urls)


# Every process (web, relays, workers, beat) takes the whole list, connects to the first
# node that answers and moves to the next one when its node goes away, without a restart
# (docs/scaling.md). Give each host its own order to spread the connections.
CELERY_BROKER_URL = _broker_urls("CELERY_BROKER_URL", "amqp://guest:guest@127.0.0.1:5672//")
# Which node of the list a client tries next: "round-robin" (the order given) or "shuffle".
CELERY_BROKER_FAILOVER_STRATEGY = env_str("NOTIFY_BROKER_FAILOVER_STRATEGY", "round-robin")
if CELERY_BROKER_FAILOVER_STRATEGY not in ("round-robin", "shuffle"):
    raise ImproperlyConfigured("NOTIFY_BROKER_FAILOVER_STRATEGY must be round-robin or shuffle")
# AMQP heartbeat of the workers' consumers (seconds; 0 off): a node that vanishes without
# closing its connections (a host lost, a cable cut) is noticed after about two missed
# beats. A publisher notices at its next publish, whose confirm does not come within
# NOTIFY_BROKER_CONFIRM_TIMEOUT. A killed broker process is noticed at once either way,
# its sockets being closed by the kernel.
CELERY_BROKER_HEARTBEAT = env_int("NOTIFY_BROKER_HEARTBEAT", 60, minimum=0)
# Seconds a client waits for one node to answer a connect before trying the next.
CELERY_BROKER_CONNECTION_TIMEOUT = env_float("NOTIFY_BROKER_CONNECT_TIMEOUT", 4.0, minimum=0.1)
# With no node answering, a worker tries the whole list again after a pause that grows
# to at most this (seconds): how late it may notice the cluster is back.
NOTIFY_BROKER_RECONNECT_MAX = env_float("NOTIFY_BROKER_RECONNECT_MAX", 5.0, minimum=0.1)
# ... and keeps trying for as long as the outage lasts (Celery's default gives up after
# 100 tries and exits the worker).
CELERY_BROKER_CONNECTION_MAX_RETRIES = None
# The queues' kind (docs/queues.md). "classic": the queues live on one node, with
# priority inside each queue (x-max-priority) — the single-broker default. "quorum":
# each queue is replicated on NOTIFY_QUORUM_REPLICAS nodes of a cluster and survives the
# loss of a minority of them; RabbitMQ 3.10 refuses x-max-priority on quorum queues,
# so priority is the three queue classes alone, and countdowns travel through Celery's
# native delayed delivery (whole seconds, on a topic exchange). A broker (vhost) that
# already has the queues of one kind cannot switch in place: see docs/scaling.md.
NOTIFY_QUEUE_TYPE = env_str("NOTIFY_QUEUE_TYPE", "classic")
if NOTIFY_QUEUE_TYPE not in ("classic", "quorum"):
    raise ImproperlyConfigured(
        f"NOTIFY_QUEUE_TYPE must be classic or quorum, got {NOTIFY_QUEUE_TYPE!r}"
    )
NOTIFY_QUORUM_QUEUES = NOTIFY_QUEUE_TYPE == "quorum"
# Several broker nodes with classic queues is a half-configured cluster: every queue lives
# on one node, and losing that node strands what it holds while the clients fail over to a
# node without it. Refused at start unless this says it is meant (say, a cluster being
# moved to quorum queues one step at a time).
NOTIFY_ALLOW_CLASSIC_QUEUES_ON_CLUSTER = env_bool("NOTIFY_ALLOW_CLASSIC_QUEUES_ON_CLUSTER", False)
if (
    ";" in CELERY_BROKER_URL
    and not NOTIFY_QUORUM_QUEUES
    and not NOTIFY_ALLOW_CLASSIC_QUEUES_ON_CLUSTER
):
    raise ImproperlyConfigured(
        "CELERY_BROKER_URL lists several broker nodes but NOTIFY_QUEUE_TYPE is classic: "
        "classic queues live on one node and losing it loses their messages. Set "
        "NOTIFY_QUEUE_TYPE=quorum for a cluster (docs/scaling.md), or "
        "NOTIFY_ALLOW_CLASSIC_QUEUES_ON_CLUSTER=1 if that is really meant."
    )
# Quorum queues: how many nodes hold each queue (3 survives one node lost, 5 two), and
# how many times one message may be delivered before the queue dead-letters it — a
# message that kills its worker every time ends in the Dead letters table instead of
# going round for ever.
NOTIFY_QUORUM_REPLICAS = env_int("NOTIFY_QUORUM_REPLICAS", 3, minimum=1)
NOTIFY_QUEUE_DELIVERY_LIMIT = env_int("NOTIFY_QUEUE_DELIVERY_LIMIT", 5, minimum=1)
# Where a new quorum queue's leader goes: "balanced" spreads the leaders of high, medium
# and low over the nodes; "client-local" puts each on the node that declared it.
NOTIFY_QUORUM_LEADER_LOCATOR = env_str("NOTIFY_QUORUM_LEADER_LOCATOR", "balanced")
NOTIFY_QUEUE_MAX_PRIORITY = env_int("NOTIFY_QUEUE_MAX_PRIORITY", 10, minimum=1)
NOTIFY_PRIORITY_FIRST_ATTEMPT = env_int("NOTIFY_PRIORITY_FIRST_ATTEMPT", 5, minimum=0)
NOTIFY_PRIORITY_RETRY = env_int("NOTIFY_PRIORITY_RETRY", 3, minimum=0)
# Native delayed delivery forwards a delayed message to its queue through the queue's
# exchange by a topic pattern, so with quorum queues the exchange is a topic one (the
# routing keys are the plain queue names, matched exactly either way).
NOTIFY_EXCHANGE = Exchange(
    "notify", type="topic" if NOTIFY_QUORUM_QUEUES else "direct", durable=True
)
NOTIFY_DEAD_LETTER_EXCHANGE = Exchange("dead_letter", type="direct", durable=True)
NOTIFY_QUEUE_NAMES = ("high", "medium", "low")
# The dead-letter consumer (a process of its own) moves each dead-lettered message into a
# table; with the queue empty it looks again this often (seconds).
NOTIFY_DEAD_LETTER_POLL_INTERVAL = env_float("NOTIFY_DEAD_LETTER_POLL_INTERVAL", 1.0, minimum=0.05)


def _quorum_arguments() -> dict[str, object]:
    return {
        "x-queue-type": "quorum",
        "x-quorum-initial-group-size": NOTIFY_QUORUM_REPLICAS,
        "x-queue-leader-locator": NOTIFY_QUORUM_LEADER_LOCATOR,
    }


def _work_queue(name: str) -> Queue:
    dead_lettering = {
        "x-dead-letter-exchange": NOTIFY_DEAD_LETTER_EXCHANGE.name,
        "x-dead-letter-routing-key": "dead_letter",
    }
    if NOTIFY_QUORUM_QUEUES:
        arguments = {
            **_quorum_arguments(),
            **dead_lettering,
            "x-delivery-limit": NOTIFY_QUEUE_DELIVERY_LIMIT,
            # At-least-once: the queue keeps a dead message until `dead_letter` has
            # confirmed it (at-most-once would drop it if that queue's node is away);
            # RabbitMQ requires reject-publish overflow for it.
            "x-dead-letter-strategy": "at-least-once",
            "x-overflow": "reject-publish",
        }
    else:
        arguments = {"x-max-priority": NOTIFY_QUEUE_MAX_PRIORITY, **dead_lettering}
    return Queue(name, NOTIFY_EXCHANGE, routing_key=name, durable=True, queue_arguments=arguments)


CELERY_TASK_QUEUES = [
    *(_work_queue(name) for name in NOTIFY_QUEUE_NAMES),
    # No delivery limit here: the consumer puts a message back when the database is
    # away, and it must never be dropped for that.
    Queue(
        "dead_letter",
        NOTIFY_DEAD_LETTER_EXCHANGE,
        routing_key="dead_letter",
        durable=True,
        queue_arguments=_quorum_arguments() if NOTIFY_QUORUM_QUEUES else None,
    ),
]
# Quorum queues switch on Celery's native delayed delivery: a countdown waits in the
# broker's `celery_delayed_*` queues (quorum too, so a delay survives a lost node), not
# unacknowledged in a worker. The worker declares them through the node it is connected
# to (notify/broker.py, WorkerConsumer), not once per node of the list.
CELERY_BROKER_NATIVE_DELAYED_DELIVERY_QUEUE_TYPE = "quorum"
CELERY_WORKER_CONSUMER = "notify.broker:WorkerConsumer"
CELERY_TASK_DEFAULT_QUEUE = "medium"
CELERY_TASK_DEFAULT_EXCHANGE = NOTIFY_EXCHANGE.name
CELERY_TASK_DEFAULT_EXCHANGE_TYPE = NOTIFY_EXCHANGE.type
CELERY_TASK_DEFAULT_ROUTING_KEY = "medium"
CELERY_TASK_CREATE_MISSING_QUEUES = False
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
# Without this a failed task's message is acked and gone instead of dead-lettered.
CELERY_TASK_ACKS_ON_FAILURE_OR_TIMEOUT = False
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_BROKER_TRANSPORT_OPTIONS = {"confirm_publish": True}
# Seconds a publisher waits for the broker's confirm before it gives up and raises (a
# broker restarting mid-publish would otherwise leave it waiting for ever).
NOTIFY_BROKER_CONFIRM_TIMEOUT = env_float("NOTIFY_BROKER_CONFIRM_TIMEOUT", 10.0, minimum=0.1)
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# A send running when the broker connection drops is let finish: it records its outcome
# in the delivery row, and the redelivered message then finds nothing to claim.
# Cancelling it (Celery's future default) could kill it between the provider's "yes"
# and that record, and the stale claim would be sent a second time.
CELERY_WORKER_CANCEL_LONG_RUNNING_TASKS_ON_CONNECTION_LOSS = False
CELERY_TASK_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_TASK_IGNORE_RESULT = True
CELERY_WORKER_HIJACK_ROOT_LOGGER = False
CELERY_TASK_TIME_LIMIT = env_int("NOTIFY_TASK_TIME_LIMIT", 300, minimum=1)
CELERY_TASK_SOFT_TIME_LIMIT = env_int("NOTIFY_TASK_SOFT_TIME_LIMIT", 240, minimum=1)
# --- Retries -------------------------------------------------------------------------------
# A retry shorter than this travels as a Celery countdown message; a longer one is left
# to the sweeper, so no message waits unacknowledged near RabbitMQ's consumer timeout.
NOTIFY_RETRY_COUNTDOWN_MAX = env_float("NOTIFY_RETRY_COUNTDOWN_MAX", 300.0, minimum=0)
NOTIFY_RETRY_SWEEP_INTERVAL = env_float("NOTIFY_RETRY_SWEEP_INTERVAL", 5.0, minimum=0.5)
# How long past due a retrying delivery may sit before the sweeper republishes it
# (its countdown message was lost, or it was never sent one).
NOTIFY_RETRY_SWEEP_GRACE = env_float("NOTIFY_RETRY_SWEEP_GRACE", 10.0, minimum=0)
NOTIFY_RETRY_SWEEP_BATCH = env_int("NOTIFY_RETRY_SWEEP_BATCH", 500, minimum=1)
# A claim (status `sending`) older than this is taken to belong to a dead worker.
NOTIFY_SEND_CLAIM_TIMEOUT = env_float("NOTIFY_SEND_CLAIM_TIMEOUT", 120.0, minimum=1)
# A stale claim is given back this many times at most: found stale once more, the
# delivery ends `dead` (`claim_recovered_too_often`), as a send that keeps killing its
# worker would otherwise be retried forever. One found past its deadline ends `expired`.
NOTIFY_CLAIM_RECOVERIES_MAX = env_int("NOTIFY_CLAIM_RECOVERIES_MAX", 3, minimum=0)
NOTIFY_RETRY_JITTER = env_float("NOTIFY_RETRY_JITTER", 0.2, minimum=0)
NOTIFY_EMAIL_RETRY_DELAYS = env_float_list(
    "NOTIFY_EMAIL_RETRY_DELAYS", [10.0, 60.0, 300.0, 1800.0, 7200.0]
)
NOTIFY_EMAIL_DEADLINE_SECONDS = env_int("NOTIFY_EMAIL_DEADLINE_SECONDS", 24 * 3600, minimum=1)
# SMS carries what is urgent (codes, alerts): fewer, shorter waits than email, and a text
# arriving an hour late mostly confuses, hence its short default deadline.
NOTIFY_SMS_RETRY_DELAYS = env_float_list("NOTIFY_SMS_RETRY_DELAYS", [5.0, 30.0, 120.0, 600.0])
NOTIFY_SMS_DEADLINE_SECONDS = env_int("NOTIFY_SMS_DEADLINE_SECONDS", 3600, minimum=1)
# A feed entry stays worth writing longer than a message interrupting the person.
NOTIFY_INAPP_DEADLINE_SECONDS = env_int("NOTIFY_INAPP_DEADLINE_SECONDS", 7 * 24 * 3600, minimum=1)
# A push (Web Push, FCM) interrupts the person now: tens of minutes late it mostly
# confuses, so it is not sent, nor held by the push service, past an hour.
NOTIFY_PUSH_DEADLINE_SECONDS = env_int("NOTIFY_PUSH_DEADLINE_SECONDS", 3600, minimum=1)
# Every delivery has a deadline: the notification's own TTL when the producer gave one;
# else the shorter of its category's TTL and this per-channel default (a category's long
# TTL must not keep a push alive for days, nor an email past its day). Past it the
# delivery ends `expired` and is never sent late.
NOTIFY_CHANNEL_DEADLINE_SECONDS = {
    "inapp": NOTIFY_INAPP_DEADLINE_SECONDS,
    "email": NOTIFY_EMAIL_DEADLINE_SECONDS,
    "webpush": NOTIFY_PUSH_DEADLINE_SECONDS,
    "fcm": NOTIFY_PUSH_DEADLINE_SECONDS,
    "sms": NOTIFY_SMS_DEADLINE_SECONDS,
}
# A delivery that has a send message in flight is republished by the sweeper only when
# it is still unclaimed this long after that publish (the message was probably lost).
NOTIFY_RETRY_RESWEEP_AFTER = env_float("NOTIFY_RETRY_RESWEEP_AFTER", 600.0, minimum=1)
# A route task that raises (the database away, a bug) is retried: base doubling to the
# ceiling, jittered, this many times; then its message is dead-lettered for an operator.
NOTIFY_ROUTE_RETRY_BASE = env_float("NOTIFY_ROUTE_RETRY_BASE", 2.0, minimum=0.01)
NOTIFY_ROUTE_RETRY_MAX = env_float("NOTIFY_ROUTE_RETRY_MAX", 120.0, minimum=0.01)
NOTIFY_ROUTE_MAX_RETRIES = env_int("NOTIFY_ROUTE_MAX_RETRIES", 5, minimum=0)
# Beat: a notification whose route task was published this long ago and is still not
# routed (its message was lost, or dead-lettered) has the task published again, at most
# NOTIFY_ROUTE_SWEEP_MAX_PUBLISHES times in all. Only notifications created within the
# window are looked at, so the sweep reads a bounded slice of the table.
NOTIFY_ROUTE_SWEEP_INTERVAL = env_float("NOTIFY_ROUTE_SWEEP_INTERVAL", 60.0, minimum=1)
NOTIFY_ROUTE_SWEEP_AFTER = env_float("NOTIFY_ROUTE_SWEEP_AFTER", 600.0, minimum=1)
NOTIFY_ROUTE_SWEEP_WINDOW = env_float("NOTIFY_ROUTE_SWEEP_WINDOW", 7 * 24 * 3600.0, minimum=1)
NOTIFY_ROUTE_SWEEP_MAX_PUBLISHES = env_int("NOTIFY_ROUTE_SWEEP_MAX_PUBLISHES", 3, minimum=1)
NOTIFY_ROUTE_SWEEP_BATCH = env_int("NOTIFY_ROUTE_SWEEP_BATCH", 500, minimum=1)
# --- Per-recipient order -----------------------------------------------------------------
# An event's occurred_at may be at most this far ahead of our clock (seconds).
NOTIFY_OCCURRED_AT_MAX_SKEW = env_float("NOTIFY_OCCURRED_AT_MAX_SKEW", 60.0, minimum=0)
# A delivery is not handed to its provider while an earlier one to the same person on
# the same channel is on its way: it is looked at again after a short countdown that
# grows with the wait, and goes anyway once held this long (seconds).
NOTIFY_ORDER_WAIT_MAX = env_float("NOTIFY_ORDER_WAIT_MAX", 30.0, minimum=0)
NOTIFY_ORDER_RECHECK = env_float("NOTIFY_ORDER_RECHECK", 0.1, minimum=0.01)
# --- Fair shares across producers (notify/fair_share.py, docs/pipeline.md) ---------------------
# On these classes the outbox relay keeps only about NOTIFY_OUTBOX_FAIR_WINDOW seconds of
# the class's sending routed-but-unsent (at the slowest rate-limited provider with work
# of the class waiting); the rest of a flood waits in the outbox, and what frees up goes
# first to the producers it published least for lately. `high` (login codes) and `low`
# (campaigns, which yield to the others) publish as before. Empty: off. The window is
# about how long a newcomer waits behind a flood; a flood keeps its provider's full rate
# while publish-to-sent takes less than the window, and drains slower past that (1.0
# drains faster on a loaded box and puts the newcomer 0.7 s further back).
NOTIFY_OUTBOX_FAIR_QUEUES = env_list("NOTIFY_OUTBOX_FAIR_QUEUES", ["medium"])
NOTIFY_OUTBOX_FAIR_WINDOW = env_float("NOTIFY_OUTBOX_FAIR_WINDOW", 0.3, minimum=0.05)
# While a fair class's rows wait for room, the relay looks again this often (seconds).
NOTIFY_OUTBOX_FAIR_RECHECK = env_float("NOTIFY_OUTBOX_FAIR_RECHECK", 0.1, minimum=0.01)
# What the relay reads to know how much of a class is routed but not sent: the
# deliveries app's count, named here where the apps are wired together.
NOTIFY_OUTBOX_BACKLOG_SOURCE = "deliveries.pipeline.class_backlog.class_unsent"
