#!/usr/bin/env bash
# The outbox relay for some queue classes, as in production:
#   scripts/relay.sh QUEUES      e.g. high,medium  or  low
# Two run in the Procfile: one for high and medium, and one for low (a campaign's
# thousands of rows), which yields the CPU to the others on a shared host
# (RELAY_LOW_NICE, 0 to turn off; RELAY_LOW_SCHED, idle or other), so its publishing never
# delays a login code's.
set -euo pipefail
# shellcheck source=scripts/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

[ $# -eq 1 ] || {
    echo "usage: scripts/relay.sh QUEUES (comma-separated: high,medium,low)" >&2
    exit 2
}
queues=$1
# PostgreSQL shows each connection's process type (pg_stat_activity, its log's %a).
export PGAPPNAME=${PGAPPNAME:-notify-relay-${queues//,/-}}
priority=()
if [ "$queues" = low ]; then # as the low worker (scripts/worker.sh): niced, SCHED_IDLE
    prefix=$(low_priority "${RELAY_LOW_NICE:-10}" "${RELAY_LOW_SCHED:-idle}")
    read -r -a priority <<<"$prefix"
fi
exec "${priority[@]}" bash scripts/manage.sh outbox_relay --queues "$queues"
