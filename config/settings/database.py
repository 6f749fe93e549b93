"""PostgreSQL (the connection pool, prepared statements) and Redis (the cache)."""

from notify.env import (
    database_from_url,
    env_bool,
    env_float,
    env_int,
    env_url,
)
from pgarrays.cursor import HotStatementCursor

# Each process keeps a bounded pool of PostgreSQL connections (psycopg's pool), shared
# by its threads: a request or task borrows one and gives it back when it ends, so no
# request or task connects anew and no process holds more than DATABASE_POOL_MAX_SIZE.
# The budget across the whole deployment (docs/connections.md) must stay under the
# server's max_connections. DATABASE_POOL=0 falls back to one persistent connection
# per thread (CONN_MAX_AGE), e.g. behind PgBouncer in transaction mode.
DATABASE_POOL = env_bool("DATABASE_POOL", True)
DATABASE_POOL_MIN_SIZE = env_int("DATABASE_POOL_MIN_SIZE", 1, minimum=0)
DATABASE_POOL_MAX_SIZE = env_int("DATABASE_POOL_MAX_SIZE", 10, minimum=1)
# How long a request or task waits for a free pooled connection before it fails.
DATABASE_POOL_TIMEOUT = env_float("DATABASE_POOL_TIMEOUT", 10.0, minimum=0.1)
# Parameters sent apart from the SQL, so that psycopg can prepare a statement a
# connection runs often and PostgreSQL plans it once per connection, not at every call:
# planning dominates the hot path's statements over partitioned history (and the hot
# statements hide their arrays' lengths so that a small batch does not plan afresh:
# pgarrays.planned_once). A statement is
# prepared at its DATABASE_PREPARE_THRESHOLD-th run on a connection (Django's default is
# never; psycopg keeps the 100 most used per connection), a hot one at its first (see
# pgarrays/cursor.py). Off behind PgBouncer in transaction mode
# (DATABASE_SERVER_SIDE_BINDING=0 turns both off).
DATABASE_SERVER_SIDE_BINDING = env_bool("DATABASE_SERVER_SIDE_BINDING", True)
DATABASE_PREPARE_THRESHOLD = env_int("DATABASE_PREPARE_THRESHOLD", 5, minimum=0)
# PostgreSQL's JIT compiler, off for every connection we open: it starts compiling when a
# plan's estimated cost passes jit_above_cost, and our statements are short (a batch's
# claim runs in ~10 ms) while the estimate over a large partitioned table can pass that
# bound, so one compile of ~350 functions (about 0.9 s of PostgreSQL CPU) went into a
# claim. DATABASE_JIT=1 leaves the server's setting (e.g. behind a PgBouncer that
# refuses the `options` startup parameter; then set jit = off in postgresql.conf).
DATABASE_JIT = env_bool("DATABASE_JIT", False)
# A process running below the usual CPU priority (the `low` worker and relay, under
# SCHED_IDLE and niced) gives the PostgreSQL backends it connects to the same, when the
# server runs on this host and the process may (root or CAP_SYS_NICE); otherwise the
# backends keep theirs, logged once (flow/backend_priority.py). 0 turns it off.
DATABASE_BACKENDS_FOLLOW_PRIORITY = env_bool("DATABASE_BACKENDS_FOLLOW_PRIORITY", True)
DATABASES = {
    "default": {
        **database_from_url("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/notify"),
        # Django's pool requires CONN_MAX_AGE=0: "closing" returns the connection.
        "CONN_MAX_AGE": 0 if DATABASE_POOL else env_int("DATABASE_CONN_MAX_AGE", 60, minimum=0),
        "CONN_HEALTH_CHECKS": not DATABASE_POOL,
        "OPTIONS": {
            **(
                {
                    "pool": {
                        "min_size": min(DATABASE_POOL_MIN_SIZE, DATABASE_POOL_MAX_SIZE),
                        "max_size": DATABASE_POOL_MAX_SIZE,
                        "timeout": DATABASE_POOL_TIMEOUT,
                    }
                }
                if DATABASE_POOL
                else {}
            ),
            "server_side_binding": DATABASE_SERVER_SIDE_BINDING,
            **({} if DATABASE_JIT else {"options": "-c jit=off"}),
            **(
                {
                    "prepare_threshold": DATABASE_PREPARE_THRESHOLD,
                    # The hot statements are prepared at their first run (pgarrays.cursor).
                    "cursor_factory": HotStatementCursor,
                }
                if DATABASE_SERVER_SIDE_BINDING
                else {}
            ),
        },
    }
}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

REDIS_URL = env_url("REDIS_URL", "redis://127.0.0.1:6379/0", schemes=("redis", "rediss"))
# Redis is on the hot path of reads (unread count) but must never hang a request when
# it is down: short timeouts, and callers degrade instead of failing.
REDIS_SOCKET_TIMEOUT = env_float("REDIS_SOCKET_TIMEOUT", 0.5, minimum=0.05)
CACHES = {
    "default": {
        "BACKEND": "django_redis.cache.RedisCache",
        "LOCATION": REDIS_URL,
        "OPTIONS": {
            "CLIENT_CLASS": "django_redis.client.DefaultClient",
            "SOCKET_CONNECT_TIMEOUT": REDIS_SOCKET_TIMEOUT,
            "SOCKET_TIMEOUT": REDIS_SOCKET_TIMEOUT,
        },
    }
}
