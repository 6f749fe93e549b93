#!/usr/bin/env bash
# One Celery worker for one queue, as in production:
#   scripts/worker.sh QUEUE [extra celery worker args]
# QUEUE is high, medium or low; the worker is named QUEUE@<host> so Flower shows which
# queue it serves (WORKER_HOSTNAME replaces <host>, e.g. for several workers of one queue
# in containers that share a host name). Threads pool with WORKER_CONCURRENCY senders (8: provider calls wait
# on the network). Each sender thread borrows one PostgreSQL connection from the
# process's pool while it runs a task, so the pool gets the senders plus 2 spare (for
# the worker's own background threads); see docs/connections.md for the budget.
set -euo pipefail
# shellcheck source=scripts/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

[ $# -ge 1 ] || {
    echo "usage: scripts/worker.sh QUEUE [extra celery worker args]" >&2
    exit 2
}
queue=$1
shift

WORKER_CONCURRENCY=${WORKER_CONCURRENCY:-8}
export DATABASE_POOL_MAX_SIZE=${DATABASE_POOL_MAX_SIZE:-$((WORKER_CONCURRENCY + 2))}

# Gossip and mingle only chat with the other workers at start and every second; nothing
# here reads them, and they slow startup with many workers.
celery=$(tool celery)
# Campaign work must not slow a login code down: on a shared host the low worker yields
# the CPU to the others (WORKER_LOW_NICE, 0 to turn off).
nice=()
if [ "$queue" = low ] && [ "${WORKER_LOW_NICE:-10}" != 0 ]; then
    nice=(nice -n "${WORKER_LOW_NICE:-10}")
fi
exec "${nice[@]}" "$celery" -A notify worker -Q "$queue" -n "$queue@${WORKER_HOSTNAME:-%h}" \
    --pool threads --concurrency "$WORKER_CONCURRENCY" \
    -l "${LOG_LEVEL:-INFO}" --without-gossip --without-mingle "$@"
