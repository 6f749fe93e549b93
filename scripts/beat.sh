#!/usr/bin/env bash
# Celery beat: publishes the periodic maintenance tasks (CELERY_BEAT_SCHEDULE in
# config/settings/beat.py: the retry and route sweeps, quiet-hours releases, unread
# reconciles, due campaigns, history, metrics) to the queues; the workers run them, beat
# runs none.
# It does not publish the outbox: the outbox relay (scripts/relay.sh, notify/relay.py)
# does, woken by PostgreSQL when outbox rows are committed (and polling every
# NOTIFY_OUTBOX_POLL_INTERVAL). The route sweep, run by a worker, only publishes again
# the route of a notification still unrouted long after the relay published it (its
# message was lost).
# Run one per host, or two anywhere: they elect one leader through a lock in Redis
# (celery-redbeat, config/celery.py) and the others wait, taking over within
# NOTIFY_BEAT_LOCK_TIMEOUT + NOTIFY_BEAT_MAX_LOOP_INTERVAL (22 s by default) when the
# leader dies, at once when it stops cleanly. The schedule's state lives in Redis too:
# there is no local schedule file.
# It never queries PostgreSQL itself, so its pool is kept small (docs/connections.md).
set -euo pipefail
# shellcheck source=scripts/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
# PostgreSQL shows each connection's process type (pg_stat_activity, its log's %a).
export PGAPPNAME=${PGAPPNAME:-notify-beat}

export DATABASE_POOL_MAX_SIZE=${DATABASE_POOL_MAX_SIZE:-2}
celery=$(tool celery)
exec "$celery" -A config beat -l "${LOG_LEVEL:-INFO}" "$@"
