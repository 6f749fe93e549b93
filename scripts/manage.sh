#!/usr/bin/env bash
# `python manage.py ARGS...` with the repo's .venv python when there is one, else the
# python on PATH (the Docker image). Used by the Procfile's relay (`outbox_relay`, which
# stops after its current round on SIGTERM) and dead-letters (`dead_letter_consumer`,
# likewise), compose and `make run`.
# A management command runs in one thread, so its pool is kept small
# (docs/connections.md); set DATABASE_POOL_MAX_SIZE for one that needs more.
set -euo pipefail
# shellcheck source=scripts/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

export DATABASE_POOL_MAX_SIZE=${DATABASE_POOL_MAX_SIZE:-2}
python=$(tool python)

exec "$python" manage.py "$@"
