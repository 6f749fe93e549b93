#!/usr/bin/env bash
# Celery workers for one queue, as in production:
#   scripts/worker.sh QUEUE [extra celery worker args]
# QUEUE is high, medium or low; each worker is named QUEUE@<host> so Flower shows which
# queue it serves (WORKER_HOSTNAME replaces <host>, e.g. for several workers of one queue
# in containers that share a host name). Threads pool with WORKER_CONCURRENCY senders (8:
# provider calls wait on the network); on high and medium one channel sends on at most
# half of them, and on any queue fewer while its provider is slow (docs/pipeline.md,
# channel isolation). Each sender thread
# borrows one PostgreSQL connection from the process's pool while it runs a task, so the
# pool gets the senders plus 2 spare (for the worker's own background threads); see
# docs/connections.md.
#
# WORKER_PROCESSES such workers run side by side (QUEUE-1@<host>, QUEUE-2@<host>, ...).
# One Python process computes on one CPU at a time (the GIL), and a campaign's batches are
# bound by that CPU, not by the network: so the low queue runs one process per CPU by
# default, high and medium one (their work waits on providers; one process answers it).
# With several, this script stays their parent: it passes SIGTERM/SIGINT on (a warm
# shutdown of each) and, when one of them exits, stops the others and exits with its
# status, so the process manager restarts the set.
set -euo pipefail
# shellcheck source=scripts/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

[ $# -ge 1 ] || {
    echo "usage: scripts/worker.sh QUEUE [extra celery worker args]" >&2
    exit 2
}
queue=$1
shift
# PostgreSQL shows each connection's process type (pg_stat_activity, its log's %a).
export PGAPPNAME=${PGAPPNAME:-notify-worker-$queue}

export WORKER_CONCURRENCY=${WORKER_CONCURRENCY:-8} # read back as NOTIFY_WORKER_THREADS
export DATABASE_POOL_MAX_SIZE=${DATABASE_POOL_MAX_SIZE:-$((WORKER_CONCURRENCY + 2))}
if [ "$queue" = low ]; then
    processes=${WORKER_PROCESSES:-$(nproc 2>/dev/null || echo 1)}
else
    processes=${WORKER_PROCESSES:-1}
fi

# Gossip and mingle only chat with the other workers at start and every second; nothing
# here reads them, and they slow startup with many workers.
celery=$(tool celery)
# Campaign work must not slow a login code down: on a shared host the low worker yields
# the CPU to the others (WORKER_LOW_NICE, 0 to turn off), and with WORKER_LOW_SCHED=idle
# (the default; "other" keeps Linux's usual policy) it runs under SCHED_IDLE: a waking
# login-code thread takes its CPU at once instead of after the running slice (a few ms
# per wake-up, and a login code wakes some twenty threads on its way).
priority=()
if [ "$queue" = low ]; then
    prefix=$(low_priority "${WORKER_LOW_NICE:-10}" "${WORKER_LOW_SCHED:-idle}")
    read -r -a priority <<<"$prefix"
fi
args=(-A config worker -Q "$queue" --pool threads --concurrency "$WORKER_CONCURRENCY"
    -l "${LOG_LEVEL:-INFO}" --without-gossip --without-mingle)
host=${WORKER_HOSTNAME:-%h}

if [ "$processes" -le 1 ]; then
    # exec: the process manager's signals (and a kill) reach Celery itself.
    exec "${priority[@]}" "$celery" "${args[@]}" -n "$queue@$host" "$@"
fi

pids=()
for i in $(seq 1 "$processes"); do
    "${priority[@]}" "$celery" "${args[@]}" -n "$queue-$i@$host" "$@" &
    pids+=($!)
done
trap 'kill -TERM "${pids[@]}" 2>/dev/null || true' TERM INT
status=0
wait -n || status=$? # the first to exit, or a signal (trapped above)
kill -TERM "${pids[@]}" 2>/dev/null || true
wait || true
exit "$status"
