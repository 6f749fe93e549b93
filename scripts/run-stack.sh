#!/usr/bin/env bash
# The whole local stack with demo data: installs what it needs, starts the local
# services, prepares the database, then runs an SMTP sink, the web server, one Celery
# worker per queue and beat in the background, logging to var/log/. Ctrl-C stops all.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

export DJANGO_DEBUG=${DJANGO_DEBUG:-1}
export DJANGO_SETTINGS_MODULE=notify.settings
export PYTHONUNBUFFERED=1
EMAIL_HOST=${EMAIL_HOST:-127.0.0.1}
EMAIL_PORT=${EMAIL_PORT:-1025}
WEB_HOST=127.0.0.1
WEB_PORT=8000
BASE_URL=http://$WEB_HOST:$WEB_PORT

venv=.venv
python=$venv/bin/python
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
    "$python" manage.py "$@"
}

bash scripts/bootstrap.sh
bash scripts/services.sh
port_open "$WEB_HOST" "$WEB_PORT" &&
    die "something already listens on $WEB_HOST:$WEB_PORT; stop it first (another make run?)"

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

# Background processes, each logging to var/log/NAME.log.
names=()
pids=()
start() { # NAME COMMAND...
    local name=$1
    shift
    "$@" >"$logs/$name.log" 2>&1 &
    names+=("$name")
    pids+=("$!")
}

any_alive() {
    local pid
    for pid in "${pids[@]}"; do
        kill -0 "$pid" 2>/dev/null && return 0
    done
    return 1
}

stop_all() {
    trap - EXIT INT TERM
    [ "${#pids[@]}" -gt 0 ] || return 0
    echo
    echo "Stopping: ${names[*]}"
    kill -TERM "${pids[@]}" 2>/dev/null || true
    for _ in $(seq 20); do
        any_alive || break
        sleep 0.5
    done
    kill -KILL "${pids[@]}" 2>/dev/null || true
    wait 2>/dev/null || true
}
trap stop_all EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

case $EMAIL_HOST in
    127.0.0.1 | localhost)
        if port_open "$EMAIL_HOST" "$EMAIL_PORT"; then
            smtp_note="$EMAIL_HOST:$EMAIL_PORT (already running, not started here)"
        else
            start smtp "$python" -m aiosmtpd -n -l "$EMAIL_HOST:$EMAIL_PORT"
            smtp_note="$EMAIL_HOST:$EMAIL_PORT, received mail is printed to $logs/smtp.log"
        fi
        ;;
    *) smtp_note="$EMAIL_HOST:$EMAIL_PORT (EMAIL_HOST is not local, no sink started)" ;;
esac

start web "$venv/bin/uvicorn" notify.asgi:application --host "$WEB_HOST" --port "$WEB_PORT"
for queue in high medium low; do
    start "worker-$queue" "$venv/bin/celery" -A notify worker -Q "$queue" -n "$queue@%h" \
        --pool threads --concurrency "${NOTIFY_WORKER_CONCURRENCY:-8}" -l INFO
done
start beat "$venv/bin/celery" -A notify beat -s var/celerybeat-schedule -l INFO

# Report a process that dies, with the end of its log.
check_alive() {
    local i
    for i in "${!pids[@]}"; do
        if ! kill -0 "${pids[$i]}" 2>/dev/null; then
            echo "run-stack: ${names[$i]} exited; last lines of $logs/${names[$i]}.log:" >&2
            tail -n 30 "$logs/${names[$i]}.log" >&2
            return 1
        fi
    done
}

for _ in $(seq 60); do
    port_open "$WEB_HOST" "$WEB_PORT" && break
    check_alive || exit 1
    sleep 0.5
done
port_open "$WEB_HOST" "$WEB_PORT" || {
    check_alive || exit 1
    die "the web server did not listen on $WEB_HOST:$WEB_PORT within 30 s; see $logs/web.log"
}

event_id="demo-$(date +%Y%m%d-%H%M%S)"
cat <<EOF

Notify is running (DJANGO_DEBUG=$DJANGO_DEBUG). Ctrl-C stops everything.

  API base   $BASE_URL/v1/
  API docs   $BASE_URL/v1/docs
  Admin      $BASE_URL/admin/   (user admin, password admin)
  API key    $api_key   (producer demo-app)
  Mail sink  $smtp_note
  Logs       $logs/{web,worker-high,worker-medium,worker-low,beat,smtp}.log

Send a demo notification (the same event_id again returns the same notification):

curl -sS -X POST $BASE_URL/v1/notifications \\
  -H 'Authorization: Bearer $api_key' \\
  -H 'Content-Type: application/json' \\
  -d '{"event_id": "$event_id", "user_id": "demo-user", "category": "order.shipped", "payload": {"order_number": "A-1001", "delivery_date": "2026-12-03", "items_count": 2}}'

Then: curl -sS -H 'Authorization: Bearer $api_key' $BASE_URL/v1/notifications/<notification_id>/status

EOF

# Run until Ctrl-C, or until any process exits (then stop the rest and say which).
while true; do
    wait -n || true
    check_alive || exit 1
done
