#!/usr/bin/env bash
# The outbox relay for some queue classes, as in production:
#   scripts/relay.sh QUEUES      e.g. high,medium  or  low
# Two run in the Procfile: one for high and medium, and one for low (a campaign's
# thousands of rows), which yields the CPU to the others on a shared host
# (RELAY_LOW_NICE, 0 to turn off), so its publishing never delays a login code's.
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
nice=()
if [ "$queues" = low ] && [ "${RELAY_LOW_NICE:-10}" != 0 ]; then
    nice=(nice -n "${RELAY_LOW_NICE:-10}")
fi
if [ "$queues" = low ]; then # SCHED_IDLE as the low worker's (scripts/worker.sh)
    prefix=$(low_sched "${RELAY_LOW_SCHED:-idle}")
    read -r -a sched <<<"$prefix"
    nice=("${sched[@]}" "${nice[@]}")
fi
exec "${nice[@]}" bash scripts/manage.sh outbox_relay --queues "$queues"
