#!/usr/bin/env bash
# The web server, as in production: the REST API, the admin, the OpenAPI docs, the
# public pages and static files, through WSGI (config.wsgi:application) under gunicorn.
# The live SSE stream (/v1/users/<id>/stream) is the other process type, scripts/stream.sh
# (ASGI); a proxy sends that one path there and everything else here (docs/web-tier.md).
#   HOST             interface to bind (127.0.0.1; compose sets 0.0.0.0)
#   PORT             8000
#   WEB_CONCURRENCY  server processes (2: one per core; docs/web-tier.md)
#   WEB_THREADS      threads per process (1: sync workers; more: gthread workers)
#   WEB_TIMEOUT      seconds a request may take before its worker is restarted (30)
#   WEB_ACCESS_LOG   1 = one log line per request (off: it costs throughput)
#
# Why gunicorn and not the ASGI server for these views: they are sync Django views, and
# under ASGI each request pays a hand-off to a thread and the event loop in front;
# measured on this app (docs/web-tier.md), gunicorn's sync workers serve intake at the
# rate of a bare DRF view on the same server, with a lower tail than uvicorn's. Each process runs WEB_THREADS requests at once and
# its PostgreSQL pool holds as many connections (DATABASE_POOL_MAX_SIZE).
set -euo pipefail
# shellcheck source=scripts/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
# PostgreSQL shows each connection's process type (pg_stat_activity, its log's %a).
export PGAPPNAME=${PGAPPNAME:-notify-web}

HOST=${HOST:-127.0.0.1}
PORT=${PORT:-8000}
WEB_CONCURRENCY=${WEB_CONCURRENCY:-2}
WEB_THREADS=${WEB_THREADS:-1}
WEB_TIMEOUT=${WEB_TIMEOUT:-30}
export DATABASE_POOL_MAX_SIZE=${DATABASE_POOL_MAX_SIZE:-$WEB_THREADS}

access_log=()
[ "${WEB_ACCESS_LOG:-0}" = 1 ] && access_log=(--access-logfile -)
log_level=$(tr '[:upper:]' '[:lower:]' <<<"${LOG_LEVEL:-INFO}")
worker_class=sync
[ "$WEB_THREADS" -gt 1 ] && worker_class=gthread

# gunicorn stops by itself when a worker cannot load the app; loading it once here first
# says why in one line, within a second, as scripts/stream.sh does.
app_loads_or_exit config.wsgi gunicorn

gunicorn=$(tool gunicorn)
exec "$gunicorn" config.wsgi:application --bind "$HOST:$PORT" \
    --workers "$WEB_CONCURRENCY" --worker-class "$worker_class" --threads "$WEB_THREADS" \
    --timeout "$WEB_TIMEOUT" --graceful-timeout 10 --log-level "$log_level" \
    "${access_log[@]}"
