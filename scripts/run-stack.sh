#!/usr/bin/env bash
# The whole local stack with demo data: installs what it needs, starts the local
# services, prepares the database, starts a dev-only SMTP sink (var/log/smtp.log), then
# runs exactly the Procfile's processes with honcho (web, the live stream's server, one
# Celery worker per queue, beat, the outbox relay, the dead-letter consumer), their logs
# on stdout. Ctrl-C stops
# all; so does any exit.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

export DJANGO_DEBUG=${DJANGO_DEBUG:-1}
export DJANGO_SETTINGS_MODULE=config.settings
export PYTHONUNBUFFERED=1
# Read by the Procfile's scripts. NOTIFY_WORKER_CONCURRENCY is the older name.
export WORKER_CONCURRENCY=${WORKER_CONCURRENCY:-${NOTIFY_WORKER_CONCURRENCY:-8}}
export WEB_ACCESS_LOG=${WEB_ACCESS_LOG:-1}
export EMAIL_HOST=${EMAIL_HOST:-127.0.0.1}
export EMAIL_PORT=${EMAIL_PORT:-1025}
WEB_HOST=127.0.0.1
WEB_PORT=8000
# honcho gives each Procfile line PORT = the base + 100 x its index: web (the first)
# listens on WEB_PORT, stream (the second) on WEB_PORT + 100. No proxy runs here.
STREAM_PORT=$((WEB_PORT + 100))
BASE_URL=http://$WEB_HOST:$WEB_PORT
# The inbox demo page (served by web) reads the stream from its own port: the stream
# process lets the web port's origin call it.
export NOTIFY_INBOX_DEMO_STREAM_BASE=${NOTIFY_INBOX_DEMO_STREAM_BASE:-http://$WEB_HOST:$STREAM_PORT}
export NOTIFY_INBOX_ALLOWED_ORIGINS=${NOTIFY_INBOX_ALLOWED_ORIGINS:-$BASE_URL}

python=.venv/bin/python
honcho=.venv/bin/honcho
logs=var/log

die() {
    echo "run-stack: $*" >&2
    exit 1
}

port_open() { # host port
    # shellcheck disable=SC2016 # expanded by the inner bash
    timeout 2 bash -c 'exec 3<>"/dev/tcp/$1/$2"' _ "$1" "$2" >/dev/null 2>&1
}

manage() {
    bash scripts/manage.sh "$@"
}

bash scripts/bootstrap.sh
bash scripts/services.sh
for port in "$WEB_PORT" "$STREAM_PORT"; do
    port_open "$WEB_HOST" "$port" &&
        die "something already listens on $WEB_HOST:$port; stop it first (another make run?)"
done

mkdir -p "$logs"
manage migrate --noinput
manage collectstatic --noinput --verbosity 0
manage seed_demo
manage create_roles >/dev/null

if ! out=$(DJANGO_SUPERUSER_USERNAME=admin DJANGO_SUPERUSER_EMAIL=admin@example.com \
    DJANGO_SUPERUSER_PASSWORD=admin manage createsuperuser --noinput 2>&1); then
    case $out in
        *"already taken"* | *"already exists"*) ;;
        *) die "createsuperuser failed: $out" ;;
    esac
fi

producer_out=$(manage create_producer demo-app) ||
    die "create_producer demo-app failed: $producer_out"
api_key=$(printf '%s\n' "$producer_out" | tail -n 1)
[[ -n $api_key && $api_key != *[[:space:]]* ]] ||
    die "create_producer did not end with an API key line; it printed: $producer_out"

# The SMTP sink is a dev-only fake, so it is not in the Procfile; it runs beside honcho.
sink_pid=""
banner_pid=""
cleanup() {
    trap - EXIT INT TERM
    [ -z "$banner_pid" ] || kill "$banner_pid" 2>/dev/null || true
    if [ -n "$sink_pid" ]; then
        kill "$sink_pid" 2>/dev/null || true
        wait "$sink_pid" 2>/dev/null || true
    fi
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

case $EMAIL_HOST in
    127.0.0.1 | localhost)
        if port_open "$EMAIL_HOST" "$EMAIL_PORT"; then
            smtp_note="$EMAIL_HOST:$EMAIL_PORT (already running, not started here)"
        else
            "$python" -m aiosmtpd -n -l "$EMAIL_HOST:$EMAIL_PORT" >"$logs/smtp.log" 2>&1 &
            sink_pid=$!
            smtp_note="$EMAIL_HOST:$EMAIL_PORT, received mail is printed to $logs/smtp.log"
        fi
        ;;
    *) smtp_note="$EMAIL_HOST:$EMAIL_PORT (EMAIL_HOST is not local, no sink started)" ;;
esac

event_id="demo-$(date +%Y%m%d-%H%M%S)"
banner() {
    cat <<EOF

Notify is running (DJANGO_DEBUG=$DJANGO_DEBUG). Ctrl-C stops everything.

  API base   $BASE_URL/v1/
  API docs   $BASE_URL/v1/docs
  Admin      $BASE_URL/admin/   (user admin, password admin)
  Inbox demo $BASE_URL/inbox/demo   (<notify-inbox> for demo-user, docs/inbox.md)
  Live SSE   http://$WEB_HOST:$STREAM_PORT/v1/users/<user_id>/stream   (the stream process;
             in a deployment a proxy serves it on the API's host: docs/web-tier.md)
  API key    $api_key   (producer demo-app)
  Mail sink  $smtp_note
  Processes  $(cut -d: -f1 Procfile | paste -sd' ') (the Procfile, via honcho)

Send a demo notification (the same event_id again returns the same notification):

curl -sS -X POST $BASE_URL/v1/notifications \\
  -H 'Authorization: Bearer $api_key' \\
  -H 'Content-Type: application/json' \\
  -d '{"event_id": "$event_id", "user_id": "demo-user", "category": "order.shipped", "payload": {"order_number": "A-1001", "delivery_date": "2026-12-03", "items_count": 2}}'

Then: curl -sS -H 'Authorization: Bearer $api_key' $BASE_URL/v1/notifications/<notification_id>/status

EOF
}

# Prints the banner once web listens, while this script (waiting on honcho) is alive.
(
    for _ in $(seq 120); do
        kill -0 $$ 2>/dev/null || exit 0
        if port_open "$WEB_HOST" "$WEB_PORT"; then
            banner
            exit 0
        fi
        sleep 0.5
    done
    echo "run-stack: the web server did not listen on $WEB_HOST:$WEB_PORT within 60 s" >&2
) &
banner_pid=$!

# Exactly the Procfile's processes. honcho gives the first one (web) PORT=$WEB_PORT, stops
# them all when one exits or on Ctrl-C, and its exit status becomes ours.
status=0
"$honcho" start -f Procfile -p "$WEB_PORT" || status=$?
exit "$status"
