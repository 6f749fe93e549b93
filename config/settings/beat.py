"""Periodic jobs: the leader-elected celery beat and its schedule."""

from django.core.exceptions import ImproperlyConfigured

from config.settings.campaigns import NOTIFY_CAMPAIGN_START_INTERVAL
from config.settings.database import REDIS_URL
from config.settings.digests import NOTIFY_DIGEST_CLOSE_INTERVAL
from config.settings.email import NOTIFY_PROVIDER_EVENT_SWEEP_INTERVAL
from config.settings.history import NOTIFY_HISTORY_MAINTENANCE_INTERVAL
from config.settings.ops import NOTIFY_METRICS_FOLD_INTERVAL
from config.settings.queues import (
    NOTIFY_BROKER_CONFIRM_TIMEOUT,
    NOTIFY_RETRY_SWEEP_INTERVAL,
    NOTIFY_ROUTE_SWEEP_INTERVAL,
)
from config.settings.recipients import (
    NOTIFY_DEFERRED_RELEASE_INTERVAL,
    NOTIFY_UNREAD_RECONCILE_INTERVAL,
)
from config.settings.webhooks import NOTIFY_WEBHOOK_SWEEP_INTERVAL
from notify.env import (
    env_float,
    env_str,
)

# --- Periodic jobs (celery beat) ------------------------------------------------------
# Several beat processes may run (one per host); exactly one schedules. celery-redbeat
# elects it with a lock in Redis that expires unless its holder renews it; the others
# wait for it, and one of them takes over within NOTIFY_BEAT_LOCK_TIMEOUT +
# NOTIFY_BEAT_MAX_LOOP_INTERVAL of the leader's death (within the interval alone when
# the leader stops cleanly and releases the lock).
# The schedule's state (when each job last ran) is in Redis too, so the new leader goes
# on where the old one stopped. config/celery.py: LeaderBeatScheduler.
CELERY_BEAT_SCHEDULER = "config.celery:LeaderBeatScheduler"
# celery-redbeat reads its settings under their own names (REDBEAT_*), outside Celery's
# CELERY_ namespace: with the prefix it would not see them and fall back to the broker's.
REDBEAT_REDIS_URL = REDIS_URL
REDBEAT_KEY_PREFIX = env_str("NOTIFY_BEAT_KEY_PREFIX", "notify:beat:")
# Seconds the leader's lock lives without renewal. The leader renews it before every
# publish, so a publish that gets its confirm (NOTIFY_BROKER_CONFIRM_TIMEOUT at most)
# ends while the lock still holds; only a broker that hangs through kombu's publish
# retries could let it outlive the lock and overlap the next leader's first publish (of
# jobs that are all safe to run twice).
NOTIFY_BEAT_LOCK_TIMEOUT = env_float("NOTIFY_BEAT_LOCK_TIMEOUT", 20.0, minimum=1)
# The longest beat sleeps between two looks at its schedule, and how often a waiting
# beat tries the lock (seconds).
NOTIFY_BEAT_MAX_LOOP_INTERVAL = env_float("NOTIFY_BEAT_MAX_LOOP_INTERVAL", 2.0, minimum=0.1)
if NOTIFY_BEAT_LOCK_TIMEOUT <= NOTIFY_BROKER_CONFIRM_TIMEOUT + NOTIFY_BEAT_MAX_LOOP_INTERVAL:
    raise ImproperlyConfigured(
        "NOTIFY_BEAT_LOCK_TIMEOUT must exceed NOTIFY_BROKER_CONFIRM_TIMEOUT plus "
        "NOTIFY_BEAT_MAX_LOOP_INTERVAL: a leader must finish a publish before its lock lapses"
    )
REDBEAT_LOCK_TIMEOUT = NOTIFY_BEAT_LOCK_TIMEOUT
CELERY_BEAT_MAX_LOOP_INTERVAL = NOTIFY_BEAT_MAX_LOOP_INTERVAL
# Redis is asked with these timeouts (seconds), so a Redis that hangs makes the leader
# give up (and exit) rather than publish on a lock it can no longer renew.
NOTIFY_BEAT_REDIS_TIMEOUT = env_float("NOTIFY_BEAT_REDIS_TIMEOUT", 5.0, minimum=0.1)
REDBEAT_REDIS_OPTIONS = {
    "socket_timeout": NOTIFY_BEAT_REDIS_TIMEOUT,
    "socket_connect_timeout": NOTIFY_BEAT_REDIS_TIMEOUT,
}
# A periodic job that beat has not sent for this many of its intervals is overdue:
# `manage.py beat_check` fails naming it, and /metrics and admin show it.
NOTIFY_BEAT_OVERDUE_FACTOR = env_float("NOTIFY_BEAT_OVERDUE_FACTOR", 3.0, minimum=1)
# A periodic job that no worker has finished for this many of its intervals is stalled
# (sent, perhaps, but not run: the workers of its queue are down or far behind):
# `manage.py beat_check` fails naming it, and /metrics shows each job's age since its
# last finished run.
NOTIFY_BEAT_STALLED_FACTOR = env_float("NOTIFY_BEAT_STALLED_FACTOR", 2.0, minimum=1)
# Maintenance runs on `high`: it is small, and recovery must not wait behind a campaign.
CELERY_BEAT_SCHEDULE = {
    "retry-sweep": {
        "task": "deliveries.sweep_due_retries",
        "schedule": NOTIFY_RETRY_SWEEP_INTERVAL,
        "options": {"queue": "high", "confirm_timeout": NOTIFY_BROKER_CONFIRM_TIMEOUT},
    },
    "route-sweep": {
        "task": "deliveries.sweep_unrouted",
        "schedule": NOTIFY_ROUTE_SWEEP_INTERVAL,
        "options": {"queue": "high", "confirm_timeout": NOTIFY_BROKER_CONFIRM_TIMEOUT},
    },
    "release-deferred": {
        "task": "deliveries.release_deferred",
        "schedule": NOTIFY_DEFERRED_RELEASE_INTERVAL,
        "options": {"queue": "high", "confirm_timeout": NOTIFY_BROKER_CONFIRM_TIMEOUT},
    },
    "unread-reconcile": {
        "task": "notify.reconcile_unread_counts",
        "schedule": NOTIFY_UNREAD_RECONCILE_INTERVAL,
        "options": {"queue": "high", "confirm_timeout": NOTIFY_BROKER_CONFIRM_TIMEOUT},
    },
    "campaigns-start-due": {
        "task": "campaigns.start_due",
        "schedule": NOTIFY_CAMPAIGN_START_INTERVAL,
        "options": {"queue": "high", "confirm_timeout": NOTIFY_BROKER_CONFIRM_TIMEOUT},
    },
    # Partitions ahead on `high` (small, and a missing month sends rows to the default
    # partition); retention's exports are long and go on `low`, after the campaigns.
    "history-partitions": {
        "task": "history.partitions_ensure",
        "schedule": NOTIFY_HISTORY_MAINTENANCE_INTERVAL,
        "options": {"queue": "high", "confirm_timeout": NOTIFY_BROKER_CONFIRM_TIMEOUT},
    },
    "history-retention": {
        "task": "history.retention_run",
        "schedule": NOTIFY_HISTORY_MAINTENANCE_INTERVAL,
        "options": {"queue": "low", "confirm_timeout": NOTIFY_BROKER_CONFIRM_TIMEOUT},
    },
    # Digests are never urgent: their close rides `low`, behind login codes; a run that
    # waited longer than one interval is dropped (the next one closes the same windows).
    "digests-close": {
        "task": "deliveries.digests_close",
        "schedule": NOTIFY_DIGEST_CLOSE_INTERVAL,
        "options": {
            "queue": "low",
            "expires": NOTIFY_DIGEST_CLOSE_INTERVAL,
            "confirm_timeout": NOTIFY_BROKER_CONFIRM_TIMEOUT,
        },
    },
    # Provider events that overtook the record of their send: applied once it is there.
    # On `low`; a run that waited longer than one interval is dropped (the next does it).
    "provider-events-sweep": {
        "task": "deliveries.provider_events_sweep",
        "schedule": NOTIFY_PROVIDER_EVENT_SWEEP_INTERVAL,
        "options": {
            "queue": "low",
            "expires": NOTIFY_PROVIDER_EVENT_SWEEP_INTERVAL,
            "confirm_timeout": NOTIFY_BROKER_CONFIRM_TIMEOUT,
        },
    },
    # Status webhooks: re-queue events whose retry is due. On `low` with the posts it
    # feeds; a run that waited longer than one interval is dropped (the next one does it).
    "webhooks-sweep": {
        "task": "deliveries.webhooks_sweep",
        "schedule": NOTIFY_WEBHOOK_SWEEP_INTERVAL,
        "options": {
            "queue": "low",
            "expires": NOTIFY_WEBHOOK_SWEEP_INTERVAL,
            "confirm_timeout": NOTIFY_BROKER_CONFIRM_TIMEOUT,
        },
    },
    # A run that waited longer than one interval is dropped: the next one does its work.
    "metrics-counts-fold": {
        "task": "deliveries.metrics_counts_fold",
        "schedule": NOTIFY_METRICS_FOLD_INTERVAL,
        "options": {
            "queue": "high",
            "expires": NOTIFY_METRICS_FOLD_INTERVAL,
            "confirm_timeout": NOTIFY_BROKER_CONFIRM_TIMEOUT,
        },
    },
}
