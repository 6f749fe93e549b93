#!/usr/bin/env bash
# The live stream's server, as in production: GET /v1/users/<id>/stream (Server-Sent
# Events, an async view) through ASGI (config.asgi:application) under uvicorn, with its
# own process manager (it restarts a worker process that dies). A proxy sends only that
# path here (docs/web-tier.md); the app is the whole project, so any other path answers
# too, as it would on the web process.
#   HOST                interface to bind (127.0.0.1; compose sets 0.0.0.0)
#   PORT                8001
#   STREAM_CONCURRENCY  server processes (1: thousands of idle streams fit one event loop)
#   WEB_ACCESS_LOG      1 = one log line per request
#
# Each open stream holds one Redis connection from the process's pool
# (NOTIFY_STREAM_REDIS_MAX_CONNECTIONS) and a PostgreSQL connection only while it reads
# the feed (DATABASE_POOL_MAX_SIZE per process).
set -euo pipefail
# shellcheck source=scripts/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
# PostgreSQL shows each connection's process type (pg_stat_activity, its log's %a).
export PGAPPNAME=${PGAPPNAME:-notify-stream}

HOST=${HOST:-127.0.0.1}
PORT=${PORT:-8001}
STREAM_CONCURRENCY=${STREAM_CONCURRENCY:-1}
export DATABASE_POOL_MAX_SIZE=${DATABASE_POOL_MAX_SIZE:-5}

access_log=--no-access-log
[ "${WEB_ACCESS_LOG:-0}" = 1 ] && access_log=--access-log
log_level=$(tr '[:upper:]' '[:lower:]' <<<"${LOG_LEVEL:-INFO}")

# uvicorn's process manager restarts a child that fails to start, without end: on a
# configuration the app refuses the parent would run on and serve nothing, and a process
# manager would see it up. So the app is loaded once here first.
app_loads_or_exit config.asgi uvicorn

# Django has no ASGI lifespan support (--lifespan off says so instead of a log line).
# Open SSE streams never end by themselves: a shutdown cuts them after 10 s, and the
# clients reconnect (with Last-Event-ID) to another process.
uvicorn=$(tool uvicorn)
exec "$uvicorn" config.asgi:application --host "$HOST" --port "$PORT" \
    --workers "$STREAM_CONCURRENCY" --loop uvloop --http httptools --lifespan off \
    "$access_log" --log-level "$log_level" --timeout-graceful-shutdown 10
