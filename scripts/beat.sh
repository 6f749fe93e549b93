#!/usr/bin/env bash
# Celery beat: publishes the periodic maintenance tasks (outbox and retry sweeps, unread
# reconciles) to the queues; it runs none itself. Run exactly one per deployment.
# It never queries PostgreSQL itself, so its pool is kept small (docs/connections.md).
set -euo pipefail
# shellcheck source=scripts/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

export DATABASE_POOL_MAX_SIZE=${DATABASE_POOL_MAX_SIZE:-2}
mkdir -p var
celery=$(tool celery)
exec "$celery" -A notify beat -s var/celerybeat-schedule -l "${LOG_LEVEL:-INFO}" "$@"
