#!/usr/bin/env bash
# The web server, as in production: the REST API, the admin and the live SSE stream (an
# async view), all through ASGI (config.asgi:application), with uvicorn's own process
# manager (it restarts a worker process that dies).
#   HOST             interface to bind (127.0.0.1; compose sets 0.0.0.0)
#   PORT             8000
#   WEB_CONCURRENCY  server processes (2: no faster with more on 2 vCPU, see README)
#   WEB_ACCESS_LOG   1 = one log line per request (off: it costs throughput)
#
# Why uvicorn --workers: measured against gunicorn + uvicorn-worker and granian on this
# app (POST /v1/notifications, 16 and 64 connections) they were equal within noise, and
# uvicorn is already a dependency. Sync views do not share one thread: Django's ASGI
# handler runs each request's sync code in a thread of its own, and each process's
# PostgreSQL pool (DATABASE_POOL_MAX_SIZE) bounds how many of them query at once.
set -euo pipefail
# shellcheck source=scripts/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

HOST=${HOST:-127.0.0.1}
PORT=${PORT:-8000}
WEB_CONCURRENCY=${WEB_CONCURRENCY:-2}
export DATABASE_POOL_MAX_SIZE=${DATABASE_POOL_MAX_SIZE:-10}

access_log=--no-access-log
[ "${WEB_ACCESS_LOG:-0}" = 1 ] && access_log=--access-log
log_level=$(tr '[:upper:]' '[:lower:]' <<<"${LOG_LEVEL:-INFO}")

# uvicorn's process manager restarts a child that fails to start, without end: on a
# configuration the app refuses (a weak SECRET_KEY with DEBUG off, a bad setting) the
# parent would run on and serve nothing, and a process manager would see it up. So load
# the app once here first, as each child will: if it refuses, exit non-zero with its
# reason, as the workers do. (About a second more at start.)
python=$(tool python)
if ! "$python" -c "import config.asgi"; then
    echo "web.sh: the application refused to start (the reason is above); uvicorn not started" >&2
    exit 1
fi

# Django has no ASGI lifespan support (--lifespan off says so instead of a log line).
# Open SSE streams never end by themselves: a shutdown cuts them after 10 s, and the
# clients reconnect (with Last-Event-ID) to another process.
uvicorn=$(tool uvicorn)
exec "$uvicorn" config.asgi:application --host "$HOST" --port "$PORT" \
    --workers "$WEB_CONCURRENCY" --loop uvloop --http httptools --lifespan off \
    "$access_log" --log-level "$log_level" --timeout-graceful-shutdown 10
