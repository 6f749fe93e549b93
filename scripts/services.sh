#!/usr/bin/env bash
# Make sure PostgreSQL, Redis and RabbitMQ answer where the settings point, starting
# the local ones that do not; then make sure the `notify` database and the RabbitMQ
# vhosts `notify_test` and `notify_test_gw0`…`gw3` (used by the tests) exist. Safe to run repeatedly.
# Reads DATABASE_URL, REDIS_URL and CELERY_BROKER_URL with the same defaults as
# config/settings/. Prints one status line per service; exits non-zero naming the
# service that does not answer.
set -euo pipefail

DATABASE_URL=${DATABASE_URL:-postgres://postgres@127.0.0.1:5432/notify}
REDIS_URL=${REDIS_URL:-redis://127.0.0.1:6379/0}
CELERY_BROKER_URL=${CELERY_BROKER_URL:-amqp://guest:guest@127.0.0.1:5672//}
TEST_VHOST=notify_test
TEST_VHOST_USER=guest
WAIT_SECONDS=${SERVICES_WAIT_SECONDS:-60}

die() {
    echo "services: $*" >&2
    exit 1
}

# url_part URL FIELD DEFAULT_PORT -> prints host, port or path (no query) of URL.
url_part() {
    local rest=${1#*://} hostport host port path
    hostport=${rest%%/*}
    hostport=${hostport##*@}
    if [[ $rest == */* ]]; then path=${rest#*/}; else path=""; fi
    path=${path%%\?*}
    if [[ $hostport == \[* ]]; then # [v6]:port
        host=${hostport%%]*}
        host=${host#[}
        port=${hostport##*]}
        port=${port#:}
    elif [[ $hostport == *:* ]]; then
        host=${hostport%:*}
        port=${hostport##*:}
    else
        host=$hostport
        port=""
    fi
    case $2 in
        host) echo "$host" ;;
        port) echo "${port:-$3}" ;;
        path) echo "$path" ;;
    esac
}

is_local() {
    case $1 in 127.0.0.1 | localhost | ::1) return 0 ;; *) return 1 ;; esac
}

tcp_open() { # host port
    # shellcheck disable=SC2016 # expanded by the inner bash
    timeout 3 bash -c 'exec 3<>"/dev/tcp/$1/$2"' _ "$1" "$2" >/dev/null 2>&1
}

pg_answers() {
    if command -v pg_isready >/dev/null 2>&1; then
        pg_isready -q -h "$PG_HOST" -p "$PG_PORT" -t 3
    else
        tcp_open "$PG_HOST" "$PG_PORT"
    fi
}

redis_answers() {
    if command -v redis-cli >/dev/null 2>&1; then
        [ "$(timeout 3 redis-cli -u "$REDIS_URL" ping 2>/dev/null)" = PONG ]
    else
        tcp_open "$REDIS_HOST" "$REDIS_PORT"
    fi
}

# A broker answers when it replies to the AMQP 0-9-1 protocol header with a frame of
# type 1 (connection.start); an open port alone is not enough while it boots.
rabbit_answers() {
    # shellcheck disable=SC2016 # expanded by the inner bash
    timeout 5 bash -c '
        exec 3<>"/dev/tcp/$1/$2" || exit 1
        printf "AMQP\x00\x00\x09\x01" >&3
        [ "$(head -c 1 <&3 | od -An -tx1 | tr -d " ")" = 01 ]
    ' _ "$RABBIT_HOST" "$RABBIT_PORT" 2>/dev/null
}

need() {
    command -v "$1" >/dev/null 2>&1 || { echo "$1 is not installed"; return 1; }
}

pg_start() {
    need pg_ctlcluster || return 127
    local version
    version=$(find /etc/postgresql -mindepth 1 -maxdepth 1 -printf '%f\n' 2>/dev/null | sort -V | tail -n 1)
    [ -n "$version" ] || { echo "no cluster under /etc/postgresql"; return 127; }
    pg_ctlcluster --skip-systemctl-redirect "$version" main start
}

redis_start() {
    need redis-server || return 127
    mkdir -p /var/lib/redis /var/log/redis
    redis-server --daemonize yes --bind 127.0.0.1 -::1 --port "$REDIS_PORT" --save "" \
        --appendonly no --dir /var/lib/redis --logfile /var/log/redis/ci.log
}

rabbit_start() {
    need rabbitmq-server || return 127
    rabbitmq-server -detached
    # await_startup returns an error while the node is not registered yet; the
    # polling in ensure() decides.
    timeout "$WAIT_SECONDS" rabbitmqctl await_startup >/dev/null 2>&1 || true
}

# ensure NAME HOST PORT CHECK START
# A start command that fails (say, the server is already booting) is not fatal by
# itself: what counts is whether the service answers within WAIT_SECONDS.
ensure() {
    local name=$1 host=$2 port=$3 check=$4 start=$5 start_log status waited=0 how=started
    if "$check"; then
        printf '%-10s %s:%s  up\n' "$name" "$host" "$port"
        return 0
    fi
    is_local "$host" ||
        die "$name is not answering on $host:$port and is not local, so it is not started here"
    start_log=$(mktemp)
    "$start" >"$start_log" 2>&1 || {
        status=$?
        if [ "$status" -eq 127 ]; then
            die "$name is not answering on $host:$port and cannot be started here:" \
                "$(cat "$start_log")"
        fi
        how="up after a failed start command"
    }
    until "$check"; do
        if [ "$waited" -ge "$WAIT_SECONDS" ]; then
            sed 's/^/    /' "$start_log" >&2
            rm -f "$start_log"
            die "$name is still not answering on $host:$port ${WAIT_SECONDS}s after" \
                "its start command (output above)"
        fi
        sleep 1
        waited=$((waited + 1))
    done
    rm -f "$start_log"
    printf '%-10s %s:%s  %s\n' "$name" "$host" "$port" "$how"
}

PG_HOST=$(url_part "$DATABASE_URL" host "")
PG_PORT=$(url_part "$DATABASE_URL" port 5432)
PG_DB=$(url_part "$DATABASE_URL" path "")
REDIS_HOST=$(url_part "$REDIS_URL" host "")
REDIS_PORT=$(url_part "$REDIS_URL" port 6379)
# A cluster's nodes come as a ";"-separated list (docs/scaling.md): the first is checked.
RABBIT_URL=${CELERY_BROKER_URL%%;*}
RABBIT_HOST=$(url_part "$RABBIT_URL" host "")
RABBIT_PORT=$(url_part "$RABBIT_URL" port 5672)
[ -n "$PG_DB" ] || die "DATABASE_URL names no database: $DATABASE_URL"

ensure PostgreSQL "$PG_HOST" "$PG_PORT" pg_answers pg_start
ensure Redis "$REDIS_HOST" "$REDIS_PORT" redis_answers redis_start
ensure RabbitMQ "$RABBIT_HOST" "$RABBIT_PORT" rabbit_answers rabbit_start

# The application database. Connect to the `postgres` maintenance database with the
# same credentials as DATABASE_URL (libpq takes the URL as it is).
base_url=${DATABASE_URL%%\?*}
maintenance_url=${base_url%/*}/postgres
exists=$(printf "SELECT 1 FROM pg_database WHERE datname = :'name'\n" |
    psql "$maintenance_url" -v ON_ERROR_STOP=1 -v name="$PG_DB" -qtA 2>&1) ||
    die "PostgreSQL: cannot list databases on $PG_HOST:$PG_PORT: $exists"
if [ "$exists" = 1 ]; then
    printf '%-10s database %s  exists\n' PostgreSQL "$PG_DB"
else
    createdb --maintenance-db="$maintenance_url" "$PG_DB" ||
        die "PostgreSQL: could not create database $PG_DB"
    printf '%-10s database %s  created\n' PostgreSQL "$PG_DB"
fi

# The tests' vhost, with full permissions for guest; needs rabbitmqctl on this machine.
if ! is_local "$RABBIT_HOST" || ! command -v rabbitmqctl >/dev/null 2>&1; then
    printf '%-10s vhost %s  not checked (no local rabbitmqctl): create it with full permissions for %s\n' \
        RabbitMQ "$TEST_VHOST" "$TEST_VHOST_USER"
    exit 0
fi
# Lists are read whole first: `grep -q` closing the pipe early would fail it under pipefail.
vhosts=$(rabbitmqctl -s list_vhosts name) || die "RabbitMQ: rabbitmqctl list_vhosts failed"
# The suite runs in parallel test processes (pytest-xdist), each on its own vhost.
for vhost in "$TEST_VHOST" "${TEST_VHOST}_gw"{0..3}; do
    if ! grep -qx "$vhost" <<<"$vhosts"; then
        rabbitmqctl -q add_vhost "$vhost" >/dev/null || die "RabbitMQ: could not add vhost $vhost"
        vhost_state=created
    else
        vhost_state=exists
    fi
    permissions=$(rabbitmqctl -s list_permissions -p "$vhost") ||
        die "RabbitMQ: rabbitmqctl list_permissions failed"
    if ! grep -qxF "$TEST_VHOST_USER"$'\t.*\t.*\t.*' <<<"$permissions"; then
        rabbitmqctl -q set_permissions -p "$vhost" "$TEST_VHOST_USER" '.*' '.*' '.*' >/dev/null ||
            die "RabbitMQ: could not give $TEST_VHOST_USER permissions on vhost $vhost"
        vhost_state="$vhost_state, permissions for $TEST_VHOST_USER set"
    fi
    printf '%-10s vhost %s  %s\n' RabbitMQ "$vhost" "$vhost_state"
done
