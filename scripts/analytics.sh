#!/usr/bin/env bash
# The analytics shipper (the Procfile's `analytics`), as in production:
#   scripts/analytics.sh
# Delivery analytics may lag by contract (a campaign's figures arrive late; a delivery's
# status is always read from PostgreSQL), so on a shared host the shipper yields the CPU
# to the workers: it runs at niceness ANALYTICS_NICE (10; 0 to turn off) under the usual
# policy (ANALYTICS_SCHED=other; idle for SCHED_IDLE). Niced rather than idle: at nice 10
# it still gets about a tenth of a CPU that nice-0 work keeps busy, so its backlog cannot
# grow without bound while transactional work fills the host. Its PostgreSQL backends
# follow it down (DATABASE_BACKENDS_FOLLOW_PRIORITY), and so does the embedded store's
# reader it runs: reports answer more slowly while the host is busy.
set -euo pipefail
# shellcheck source=scripts/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

export PGAPPNAME=${PGAPPNAME:-notify-analytics}
prefix=$(low_priority "${ANALYTICS_NICE:-10}" "${ANALYTICS_SCHED:-other}")
read -r -a priority <<<"$prefix"
exec "${priority[@]}" bash scripts/manage.sh analytics_ship
