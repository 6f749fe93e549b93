"""Django settings for Notify.

Everything comes from the environment, with defaults that point at the local
PostgreSQL, RabbitMQ and Redis on their standard ports. Every number the platform
works by is a setting here (prefix NOTIFY_), read once at start, grouped by topic.
"""

from __future__ import annotations

import os
import socket
from pathlib import Path

from django.core.exceptions import ImproperlyConfigured
from kombu import Exchange, Queue

from notify.env import (
    database_from_url,
    env_bool,
    env_float,
    env_float_list,
    env_int,
    env_list,
    env_str,
    env_url,
    secret_text,
)

BASE_DIR = Path(__file__).resolve().parent.parent

DEBUG = env_bool("DJANGO_DEBUG", False)
# Signs user tokens, unsubscribe links and the gate's seals. With DEBUG off the web
# process refuses to start on this built-in key or any key shorter than 50 characters
# (notify/checks.py). To rotate: the new key here, the old one in the fallbacks until
# what it signed has expired (comma-separated).
SECRET_KEY_DEFAULT = "dev-only-insecure-key-change-me-in-any-deployment"
SECRET_KEY = env_str("DJANGO_SECRET_KEY", SECRET_KEY_DEFAULT)
SECRET_KEY_FALLBACKS = env_list("DJANGO_SECRET_KEY_FALLBACKS", [])
# Erasure keeps consent records and suppression entries under an HMAC of the user id (and
# of the email and phone) made with this key. It is not SECRET_KEY and is never rotated:
# a new key would make every erased person's consent history unfindable and their
# suppression ineffective. `check --deploy` refuses the built-in value (docs/erasure.md).
NOTIFY_ERASURE_KEY_DEFAULT = "dev-only-erasure-key-change-me-in-any-deployment"
NOTIFY_ERASURE_KEY = env_str("NOTIFY_ERASURE_KEY", NOTIFY_ERASURE_KEY_DEFAULT)
ALLOWED_HOSTS = env_list("DJANGO_ALLOWED_HOSTS", ["127.0.0.1", "localhost", "testserver", "web"])
CSRF_TRUSTED_ORIGINS = env_list("DJANGO_CSRF_TRUSTED_ORIGINS", [])
# Absolute base for links we put in messages (unsubscribe, tracking).
NOTIFY_PUBLIC_URL = env_url(
    "NOTIFY_PUBLIC_URL", "http://127.0.0.1:8000", schemes=("http", "https")
).rstrip("/")

# --- HTTPS and the proxy in front ----------------------------------------------------------
# Off by default so `make run` works over plain http on 127.0.0.1. A deployment served
# over HTTPS sets DJANGO_HTTPS=1, which turns on each setting below (each can still be
# set on its own): redirect http to https, HSTS for a year (subdomains, preload), and
# cookies sent over HTTPS only. README "Deploying" lists them.
DJANGO_HTTPS = env_bool("DJANGO_HTTPS", False)
SECURE_SSL_REDIRECT = env_bool("DJANGO_SECURE_SSL_REDIRECT", DJANGO_HTTPS)
# Probes and scrapes come over plain http from inside the network: never redirected.
SECURE_REDIRECT_EXEMPT = [r"^healthz$", r"^readyz$", r"^metrics$"]
SECURE_HSTS_SECONDS = env_int(
    "DJANGO_SECURE_HSTS_SECONDS", 365 * 24 * 3600 if DJANGO_HTTPS else 0, minimum=0
)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("DJANGO_SECURE_HSTS_INCLUDE_SUBDOMAINS", DJANGO_HTTPS)
SECURE_HSTS_PRELOAD = env_bool("DJANGO_SECURE_HSTS_PRELOAD", DJANGO_HTTPS)
SESSION_COOKIE_SECURE = env_bool("DJANGO_SESSION_COOKIE_SECURE", DJANGO_HTTPS)
CSRF_COOKIE_SECURE = env_bool("DJANGO_CSRF_COOKIE_SECURE", DJANGO_HTTPS)
# Behind a proxy that ends TLS, the request reaches us as http: name the header the proxy
# sets to "https" (e.g. X-Forwarded-Proto). Only when the proxy always sets or strips
# it: a client could otherwise claim https itself. Empty: no header is trusted.
_PROXY_SSL_HEADER = env_str("DJANGO_SECURE_PROXY_SSL_HEADER", "").strip()
SECURE_PROXY_SSL_HEADER = (
    ("HTTP_" + _PROXY_SSL_HEADER.upper().replace("-", "_"), "https") if _PROXY_SSL_HEADER else None
)
# Take the host from X-Forwarded-Host (a proxy that rewrites Host); ALLOWED_HOSTS still
# applies to it.
USE_X_FORWARDED_HOST = env_bool("DJANGO_USE_X_FORWARDED_HOST", False)

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "notify",
    "preferences",
    "templates_admin",
    "deliveries",
    "history",
    "campaigns",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "notify.urls"
ASGI_APPLICATION = "notify.asgi.application"
WSGI_APPLICATION = "notify.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

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
# planning dominates the hot path's statements over partitioned history. A statement is
# prepared at its DATABASE_PREPARE_THRESHOLD-th run on a connection (Django's default is
# never; psycopg keeps the 100 most used per connection). Off behind PgBouncer in
# transaction mode (DATABASE_SERVER_SIDE_BINDING=0 turns both off).
DATABASE_SERVER_SIDE_BINDING = env_bool("DATABASE_SERVER_SIDE_BINDING", True)
DATABASE_PREPARE_THRESHOLD = env_int("DATABASE_PREPARE_THRESHOLD", 5, minimum=0)
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
            **(
                {"prepare_threshold": DATABASE_PREPARE_THRESHOLD}
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

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = BASE_DIR / "staticfiles"

# --- REST API -------------------------------------------------------------------------
REST_FRAMEWORK = {
    # End-user tokens are tried first; they only claim `ut_…` bearer values.
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "notify.api.auth.UserTokenAuthentication",
        "notify.api.auth.ApiKeyAuthentication",
    ],
    # An API key narrowed by scopes reaches only the operations they name.
    "DEFAULT_PERMISSION_CLASSES": [
        "rest_framework.permissions.IsAuthenticated",
        "notify.api.auth.ApiKeyScopes",
    ],
    "DEFAULT_RENDERER_CLASSES": [
        "rest_framework.renderers.JSONRenderer",
        "rest_framework.renderers.BrowsableAPIRenderer",
    ],
    # DRF's JSON parser plus refusals of NUL, lone surrogates, NaN/inf and deep nesting.
    "DEFAULT_PARSER_CLASSES": ["notify.api.parsers.JSONParser"],
    "EXCEPTION_HANDLER": "notify.api.errors.exception_handler",
    # Every operation draws from its caller's token bucket (per API key, per end user).
    "DEFAULT_THROTTLE_CLASSES": ["notify.api.auth.ApiRateThrottle"],
    # Adds the error answers every operation shares, the auth schemes and id constraints.
    "DEFAULT_SCHEMA_CLASS": "notify.api.schema.NotifyAutoSchema",
    "UNAUTHENTICATED_USER": None,
}
SPECTACULAR_SETTINGS = {
    "TITLE": "Notify API",
    "DESCRIPTION": "Events in; in-app, email, push and SMS notifications out.",
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    "COMPONENT_SPLIT_REQUEST": True,
    # Served from the installed sidecar package: no CDN needed.
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "SERVE_PERMISSIONS": ["rest_framework.permissions.AllowAny"],
    "SERVE_AUTHENTICATION": [],
    # Enums stay inline: the enum hook would turn each `{"enum": [...]}` of a rule (e.g.
    # "kind webpush needs endpoint and keys") into a shared component of all the values.
    # Ours adds the links from a created resource to the operations on it.
    "POSTPROCESSING_HOOKS": [
        "notify.api.schema.add_links",
        "deliveries.api.stream_schema.add_stream",
    ],
}

# --- Intake and the outbox relay -----------------------------------------------------------
NOTIFY_MAX_BODY_BYTES = env_int("NOTIFY_MAX_BODY_BYTES", 64 * 1024, minimum=1024)
# Request JSON nested deeper than this is refused (400): real payloads are shallow, and
# deep nesting costs recursion in every layer that walks it.
NOTIFY_API_MAX_JSON_DEPTH = env_int("NOTIFY_API_MAX_JSON_DEPTH", 32, minimum=2)
# Lists in request bodies (e.g. feed ids to mark read) hold at most this many items.
NOTIFY_API_MAX_LIST_ITEMS = env_int("NOTIFY_API_MAX_LIST_ITEMS", 1000, minimum=1)
# Rate limits, one token bucket in Redis per API key (every operation it makes; a key's
# own rate in admin wins) and one per end user's token (a browser or app polling its
# feed, count and preferences): over it, 429 with Retry-After.
NOTIFY_API_RATE_PER_SECOND = env_float("NOTIFY_API_RATE_PER_SECOND", 100.0, minimum=0.01)
NOTIFY_API_RATE_BURST = env_int("NOTIFY_API_RATE_BURST", 200, minimum=1)
NOTIFY_USER_RATE_PER_SECOND = env_float("NOTIFY_USER_RATE_PER_SECOND", 5.0, minimum=0.01)
NOTIFY_USER_RATE_BURST = env_int("NOTIFY_USER_RATE_BURST", 30, minimum=1)
# With Redis down the limiter cannot count. Open (the default) lets requests through:
# Redis holds only the buckets and caches, intake needs only PostgreSQL, and a Redis
# outage must not become an API outage. Closed (0) answers 503 with Retry-After
# instead, for deployments that face producers they do not trust.
NOTIFY_API_RATE_LIMIT_FAIL_OPEN = env_bool("NOTIFY_API_RATE_LIMIT_FAIL_OPEN", True)
NOTIFY_DEFAULT_LOCALE = env_str("NOTIFY_DEFAULT_LOCALE", "en")
# A scheduled notification (send_at) may be at most this far ahead.
NOTIFY_SEND_AT_MAX_DAYS = env_int("NOTIFY_SEND_AT_MAX_DAYS", 90, minimum=1)
# A batch request carries at most this many events, in a body of at most this size.
NOTIFY_BATCH_MAX_EVENTS = env_int("NOTIFY_BATCH_MAX_EVENTS", 1000, minimum=1)
NOTIFY_BATCH_MAX_BODY_BYTES = env_int("NOTIFY_BATCH_MAX_BODY_BYTES", 4 * 1024 * 1024, minimum=1024)
# A campaign launched over the API may carry its audience as a list of user ids
# (NOTIFY_CAMPAIGN_MAX_USER_IDS of them, ~150 characters each): its body may be this large.
NOTIFY_CAMPAIGN_MAX_BODY_BYTES = env_int(
    "NOTIFY_CAMPAIGN_MAX_BODY_BYTES", 16 * 1024 * 1024, minimum=1024
)
# Bodies past those limits get our own 413; this only bounds what Django buffers.
DATA_UPLOAD_MAX_MEMORY_SIZE = (
    max(NOTIFY_MAX_BODY_BYTES, NOTIFY_BATCH_MAX_BODY_BYTES, NOTIFY_CAMPAIGN_MAX_BODY_BYTES) * 2
)
# API keys, their categories, the categories themselves and each user id's recipient id
# are kept in each process for this long (seconds), so that authenticating and reading an
# unread count cost no query. It is the revocation bound: a revoked key, a changed
# category, or an erased person's token reading their count takes effect within it on
# every process (at once on the one that revoked or erased).
NOTIFY_AUTH_CACHE_SECONDS = env_float("NOTIFY_AUTH_CACHE_SECONDS", 5.0, minimum=0)
# The relay publishes at most this many outbox rows per round, and looks for rows even
# without a wake-up this often (a lost NOTIFY, a broker that was away).
NOTIFY_OUTBOX_BATCH = env_int("NOTIFY_OUTBOX_BATCH", 500, minimum=1)
NOTIFY_OUTBOX_POLL_INTERVAL = env_float("NOTIFY_OUTBOX_POLL_INTERVAL", 1.0, minimum=0.05)

# --- Batches: route and send many notifications per task ---------------------------------
# A campaign's (`low`) work goes in batches of at most this many: one route task routes
# that many notifications (one lock, one gate read, one write), and one send task per
# channel sends that many deliveries (one claim, one provider session, one record).
NOTIFY_BATCH_SIZE = env_int("NOTIFY_BATCH_SIZE", 200, minimum=1)
# Transactional work (`high`, `medium`) is batched only as it is already queued
# together, never waiting for a batch to fill, and in smaller batches, so that several
# sender threads share a burst.
NOTIFY_BATCH_SIZE_TRANSACTIONAL = env_int("NOTIFY_BATCH_SIZE_TRANSACTIONAL", 25, minimum=1)
# A send batch goes in rounds (claim, send, record) of about this many seconds: a round
# grows while the provider answers fast and shrinks to one message when it is slow, so a
# campaign's pause reaches the rest of a batch within a round. The first round's size:
NOTIFY_BATCH_ROUND_SECONDS = env_float("NOTIFY_BATCH_ROUND_SECONDS", 0.5, minimum=0.001)
NOTIFY_BATCH_ROUND_START = env_int("NOTIFY_BATCH_ROUND_START", 2, minimum=1)
# A message a provider took before its round was recorded is marked in Redis for this
# long (seconds), so the sweeper settles a killed worker's claim instead of resending it;
# longer than the claim timeout plus the sweeper's interval.
NOTIFY_SENT_MARK_SECONDS = env_int("NOTIFY_SENT_MARK_SECONDS", 3600, minimum=60)
# Low-priority outbox rows (campaigns) go out at most this many per relay round (one
# route batch message), so the high and medium classes are looked at again in between.
NOTIFY_OUTBOX_LOW_BATCH = env_int("NOTIFY_OUTBOX_LOW_BATCH", NOTIFY_BATCH_SIZE, minimum=1)


# --- Celery on RabbitMQ: queues, priorities, acknowledgements ------------------------------
def _broker_urls(name: str, default: str) -> str:
    """One broker URL, or the nodes of a RabbitMQ cluster as Celery's failover list (URLs
    separated by ";"); each is checked, so a typo in the third node stops the start too."""
    raw = env_str(name, default)
    urls = [url.strip() for url in raw.split(";") if url.strip()]
    if not urls:
        raise ImproperlyConfigured(f"{name} must name at least one broker URL")
    for position, url in enumerate(urls, start=1):
        # No variable has this name: env_url checks `url` and names the node in its error.
        env_url(f"{name} (node {position})", url, schemes=("amqp", "amqps"))
    return ";".join(urls)


# Every process (web, relays, workers, beat) takes the whole list, connects to the first
# node that answers and moves to the next one when its node goes away, without a restart
# (docs/scaling.md). Give each host its own order to spread the connections.
CELERY_BROKER_URL = _broker_urls("CELERY_BROKER_URL", "amqp://guest:guest@127.0.0.1:5672//")
# Which node of the list a client tries next: "round-robin" (the order given) or "shuffle".
CELERY_BROKER_FAILOVER_STRATEGY = env_str("NOTIFY_BROKER_FAILOVER_STRATEGY", "round-robin")
if CELERY_BROKER_FAILOVER_STRATEGY not in ("round-robin", "shuffle"):
    raise ImproperlyConfigured("NOTIFY_BROKER_FAILOVER_STRATEGY must be round-robin or shuffle")
# AMQP heartbeat of the workers' consumers (seconds; 0 off): a node that vanishes without
# closing its connections (a host lost, a cable cut) is noticed after about two missed
# beats. A publisher notices at its next publish, whose confirm does not come within
# NOTIFY_BROKER_CONFIRM_TIMEOUT. A killed broker process is noticed at once either way,
# its sockets being closed by the kernel.
CELERY_BROKER_HEARTBEAT = env_int("NOTIFY_BROKER_HEARTBEAT", 60, minimum=0)
# Seconds a client waits for one node to answer a connect before trying the next.
CELERY_BROKER_CONNECTION_TIMEOUT = env_float("NOTIFY_BROKER_CONNECT_TIMEOUT", 4.0, minimum=0.1)
# With no node answering, a worker tries the whole list again after a pause that grows
# to at most this (seconds): how late it may notice the cluster is back.
NOTIFY_BROKER_RECONNECT_MAX = env_float("NOTIFY_BROKER_RECONNECT_MAX", 5.0, minimum=0.1)
# ... and keeps trying for as long as the outage lasts (Celery's default gives up after
# 100 tries and exits the worker).
CELERY_BROKER_CONNECTION_MAX_RETRIES = None
# The queues' kind (docs/queues.md). "classic": the queues live on one node, with
# priority inside each queue (x-max-priority) — the single-broker default. "quorum":
# each queue is replicated on NOTIFY_QUORUM_REPLICAS nodes of a cluster and survives the
# loss of a minority of them; RabbitMQ 3.10 refuses x-max-priority on quorum queues,
# so priority is the three queue classes alone, and countdowns travel through Celery's
# native delayed delivery (whole seconds, on a topic exchange). A broker (vhost) that
# already has the queues of one kind cannot switch in place: see docs/scaling.md.
NOTIFY_QUEUE_TYPE = env_str("NOTIFY_QUEUE_TYPE", "classic")
if NOTIFY_QUEUE_TYPE not in ("classic", "quorum"):
    raise ImproperlyConfigured(
        f"NOTIFY_QUEUE_TYPE must be classic or quorum, got {NOTIFY_QUEUE_TYPE!r}"
    )
NOTIFY_QUORUM_QUEUES = NOTIFY_QUEUE_TYPE == "quorum"
# Quorum queues: how many nodes hold each queue (3 survives one node lost, 5 two), and
# how many times one message may be delivered before the queue dead-letters it — a
# message that kills its worker every time ends in the Dead letters table instead of
# going round for ever.
NOTIFY_QUORUM_REPLICAS = env_int("NOTIFY_QUORUM_REPLICAS", 3, minimum=1)
NOTIFY_QUEUE_DELIVERY_LIMIT = env_int("NOTIFY_QUEUE_DELIVERY_LIMIT", 5, minimum=1)
# Where a new quorum queue's leader goes: "balanced" spreads the leaders of high, medium
# and low over the nodes; "client-local" puts each on the node that declared it.
NOTIFY_QUORUM_LEADER_LOCATOR = env_str("NOTIFY_QUORUM_LEADER_LOCATOR", "balanced")
NOTIFY_QUEUE_MAX_PRIORITY = env_int("NOTIFY_QUEUE_MAX_PRIORITY", 10, minimum=1)
NOTIFY_PRIORITY_FIRST_ATTEMPT = env_int("NOTIFY_PRIORITY_FIRST_ATTEMPT", 5, minimum=0)
NOTIFY_PRIORITY_RETRY = env_int("NOTIFY_PRIORITY_RETRY", 3, minimum=0)
# Native delayed delivery forwards a delayed message to its queue through the queue's
# exchange by a topic pattern, so with quorum queues the exchange is a topic one (the
# routing keys are the plain queue names, matched exactly either way).
NOTIFY_EXCHANGE = Exchange(
    "notify", type="topic" if NOTIFY_QUORUM_QUEUES else "direct", durable=True
)
NOTIFY_DEAD_LETTER_EXCHANGE = Exchange("dead_letter", type="direct", durable=True)
NOTIFY_QUEUE_NAMES = ("high", "medium", "low")
# The dead-letter consumer (a process of its own) moves each dead-lettered message into a
# table; with the queue empty it looks again this often (seconds).
NOTIFY_DEAD_LETTER_POLL_INTERVAL = env_float("NOTIFY_DEAD_LETTER_POLL_INTERVAL", 1.0, minimum=0.05)
# Campaign work yields to login codes (notify/priority.py): a `low` task waits while a
# `high` task started within the window (seconds; 0 turns it off), at most the max.
NOTIFY_CAMPAIGN_YIELD_WINDOW = env_float("NOTIFY_CAMPAIGN_YIELD_WINDOW", 0.2, minimum=0)
NOTIFY_CAMPAIGN_YIELD_MAX = env_float("NOTIFY_CAMPAIGN_YIELD_MAX", 0.5, minimum=0)
# Inside a campaign batch, the yield is looked at again at most this often (seconds)
# between two provider calls, as it is between two tasks.
NOTIFY_CAMPAIGN_YIELD_CHECK = env_float("NOTIFY_CAMPAIGN_YIELD_CHECK", 0.05, minimum=0)
# While high work outlasts that wait, this many campaign tasks per process run at a time
# (each waits for its turn at most NOTIFY_CAMPAIGN_YIELD_MAX again).
NOTIFY_CAMPAIGN_YIELD_CONCURRENCY = env_int("NOTIFY_CAMPAIGN_YIELD_CONCURRENCY", 1, minimum=1)
# Which processes share the CPU (and so yield to each other): the host name by default;
# containers on one machine set one value for all.
NOTIFY_CAMPAIGN_YIELD_SCOPE = env_str("NOTIFY_CAMPAIGN_YIELD_SCOPE", socket.gethostname())


def _quorum_arguments() -> dict[str, object]:
    return {
        "x-queue-type": "quorum",
        "x-quorum-initial-group-size": NOTIFY_QUORUM_REPLICAS,
        "x-queue-leader-locator": NOTIFY_QUORUM_LEADER_LOCATOR,
    }


def _work_queue(name: str) -> Queue:
    dead_lettering = {
        "x-dead-letter-exchange": NOTIFY_DEAD_LETTER_EXCHANGE.name,
        "x-dead-letter-routing-key": "dead_letter",
    }
    if NOTIFY_QUORUM_QUEUES:
        arguments = {
            **_quorum_arguments(),
            **dead_lettering,
            "x-delivery-limit": NOTIFY_QUEUE_DELIVERY_LIMIT,
            # At-least-once: the queue keeps a dead message until `dead_letter` has
            # confirmed it (at-most-once would drop it if that queue's node is away);
            # RabbitMQ requires reject-publish overflow for it.
            "x-dead-letter-strategy": "at-least-once",
            "x-overflow": "reject-publish",
        }
    else:
        arguments = {"x-max-priority": NOTIFY_QUEUE_MAX_PRIORITY, **dead_lettering}
    return Queue(name, NOTIFY_EXCHANGE, routing_key=name, durable=True, queue_arguments=arguments)


CELERY_TASK_QUEUES = [
    *(_work_queue(name) for name in NOTIFY_QUEUE_NAMES),
    # No delivery limit here: the consumer puts a message back when the database is
    # away, and it must never be dropped for that.
    Queue(
        "dead_letter",
        NOTIFY_DEAD_LETTER_EXCHANGE,
        routing_key="dead_letter",
        durable=True,
        queue_arguments=_quorum_arguments() if NOTIFY_QUORUM_QUEUES else None,
    ),
]
# Quorum queues switch on Celery's native delayed delivery: a countdown waits in the
# broker's `celery_delayed_*` queues (quorum too, so a delay survives a lost node), not
# unacknowledged in a worker. The worker declares them through the node it is connected
# to (notify/broker.py, WorkerConsumer), not once per node of the list.
CELERY_BROKER_NATIVE_DELAYED_DELIVERY_QUEUE_TYPE = "quorum"
CELERY_WORKER_CONSUMER = "notify.broker:WorkerConsumer"
CELERY_TASK_DEFAULT_QUEUE = "medium"
CELERY_TASK_DEFAULT_EXCHANGE = NOTIFY_EXCHANGE.name
CELERY_TASK_DEFAULT_EXCHANGE_TYPE = NOTIFY_EXCHANGE.type
CELERY_TASK_DEFAULT_ROUTING_KEY = "medium"
CELERY_TASK_CREATE_MISSING_QUEUES = False
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
# Without this a failed task's message is acked and gone instead of dead-lettered.
CELERY_TASK_ACKS_ON_FAILURE_OR_TIMEOUT = False
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_BROKER_TRANSPORT_OPTIONS = {"confirm_publish": True}
# Seconds a publisher waits for the broker's confirm before it gives up and raises (a
# broker restarting mid-publish would otherwise leave it waiting for ever).
NOTIFY_BROKER_CONFIRM_TIMEOUT = env_float("NOTIFY_BROKER_CONFIRM_TIMEOUT", 10.0, minimum=0.1)
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# A send running when the broker connection drops is let finish: it records its outcome
# in the delivery row, and the redelivered message then finds nothing to claim.
# Cancelling it (Celery's future default) could kill it between the provider's "yes"
# and that record, and the stale claim would be sent a second time.
CELERY_WORKER_CANCEL_LONG_RUNNING_TASKS_ON_CONNECTION_LOSS = False
CELERY_TASK_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_TASK_IGNORE_RESULT = True
CELERY_WORKER_HIJACK_ROOT_LOGGER = False
CELERY_TASK_TIME_LIMIT = env_int("NOTIFY_TASK_TIME_LIMIT", 300, minimum=1)
CELERY_TASK_SOFT_TIME_LIMIT = env_int("NOTIFY_TASK_SOFT_TIME_LIMIT", 240, minimum=1)
# --- Retries -------------------------------------------------------------------------------
# A retry shorter than this travels as a Celery countdown message; a longer one is left
# to the sweeper, so no message waits unacknowledged near RabbitMQ's consumer timeout.
NOTIFY_RETRY_COUNTDOWN_MAX = env_float("NOTIFY_RETRY_COUNTDOWN_MAX", 300.0, minimum=0)
NOTIFY_RETRY_SWEEP_INTERVAL = env_float("NOTIFY_RETRY_SWEEP_INTERVAL", 5.0, minimum=0.5)
# How long past due a retrying delivery may sit before the sweeper republishes it
# (its countdown message was lost, or it was never sent one).
NOTIFY_RETRY_SWEEP_GRACE = env_float("NOTIFY_RETRY_SWEEP_GRACE", 10.0, minimum=0)
NOTIFY_RETRY_SWEEP_BATCH = env_int("NOTIFY_RETRY_SWEEP_BATCH", 500, minimum=1)
# A claim (status `sending`) older than this is taken to belong to a dead worker.
NOTIFY_SEND_CLAIM_TIMEOUT = env_float("NOTIFY_SEND_CLAIM_TIMEOUT", 120.0, minimum=1)
NOTIFY_RETRY_JITTER = env_float("NOTIFY_RETRY_JITTER", 0.2, minimum=0)
NOTIFY_EMAIL_RETRY_DELAYS = env_float_list(
    "NOTIFY_EMAIL_RETRY_DELAYS", [10.0, 60.0, 300.0, 1800.0, 7200.0]
)
NOTIFY_EMAIL_DEADLINE_SECONDS = env_int("NOTIFY_EMAIL_DEADLINE_SECONDS", 24 * 3600, minimum=1)
# SMS carries what is urgent (codes, alerts): fewer, shorter waits than email, and a text
# arriving an hour late mostly confuses, hence its short default deadline.
NOTIFY_SMS_RETRY_DELAYS = env_float_list("NOTIFY_SMS_RETRY_DELAYS", [5.0, 30.0, 120.0, 600.0])
NOTIFY_SMS_DEADLINE_SECONDS = env_int("NOTIFY_SMS_DEADLINE_SECONDS", 3600, minimum=1)
# A feed entry stays worth writing longer than a message interrupting the person.
NOTIFY_INAPP_DEADLINE_SECONDS = env_int("NOTIFY_INAPP_DEADLINE_SECONDS", 7 * 24 * 3600, minimum=1)
# A push (Web Push, FCM) interrupts the person now: tens of minutes late it mostly
# confuses, so it is not sent, nor held by the push service, past an hour.
NOTIFY_PUSH_DEADLINE_SECONDS = env_int("NOTIFY_PUSH_DEADLINE_SECONDS", 3600, minimum=1)
# Every delivery has a deadline: the notification's own TTL when the producer gave one;
# else the shorter of its category's TTL and this per-channel default (a category's long
# TTL must not keep a push alive for days, nor an email past its day). Past it the
# delivery ends `expired` and is never sent late.
NOTIFY_CHANNEL_DEADLINE_SECONDS = {
    "inapp": NOTIFY_INAPP_DEADLINE_SECONDS,
    "email": NOTIFY_EMAIL_DEADLINE_SECONDS,
    "webpush": NOTIFY_PUSH_DEADLINE_SECONDS,
    "fcm": NOTIFY_PUSH_DEADLINE_SECONDS,
    "sms": NOTIFY_SMS_DEADLINE_SECONDS,
}
# A delivery that has a send message in flight is republished by the sweeper only when
# it is still unclaimed this long after that publish (the message was probably lost).
NOTIFY_RETRY_RESWEEP_AFTER = env_float("NOTIFY_RETRY_RESWEEP_AFTER", 600.0, minimum=1)
# A route task that raises (the database away, a bug) is retried: base doubling to the
# ceiling, jittered, this many times; then its message is dead-lettered for an operator.
NOTIFY_ROUTE_RETRY_BASE = env_float("NOTIFY_ROUTE_RETRY_BASE", 2.0, minimum=0.01)
NOTIFY_ROUTE_RETRY_MAX = env_float("NOTIFY_ROUTE_RETRY_MAX", 120.0, minimum=0.01)
NOTIFY_ROUTE_MAX_RETRIES = env_int("NOTIFY_ROUTE_MAX_RETRIES", 5, minimum=0)
# Beat: a notification whose route task was published this long ago and is still not
# routed (its message was lost, or dead-lettered) has the task published again, at most
# NOTIFY_ROUTE_SWEEP_MAX_PUBLISHES times in all. Only notifications created within the
# window are looked at, so the sweep reads a bounded slice of the table.
NOTIFY_ROUTE_SWEEP_INTERVAL = env_float("NOTIFY_ROUTE_SWEEP_INTERVAL", 60.0, minimum=1)
NOTIFY_ROUTE_SWEEP_AFTER = env_float("NOTIFY_ROUTE_SWEEP_AFTER", 600.0, minimum=1)
NOTIFY_ROUTE_SWEEP_WINDOW = env_float("NOTIFY_ROUTE_SWEEP_WINDOW", 7 * 24 * 3600.0, minimum=1)
NOTIFY_ROUTE_SWEEP_MAX_PUBLISHES = env_int("NOTIFY_ROUTE_SWEEP_MAX_PUBLISHES", 3, minimum=1)
NOTIFY_ROUTE_SWEEP_BATCH = env_int("NOTIFY_ROUTE_SWEEP_BATCH", 500, minimum=1)
# --- Per-recipient order -----------------------------------------------------------------
# An event's occurred_at may be at most this far ahead of our clock (seconds).
NOTIFY_OCCURRED_AT_MAX_SKEW = env_float("NOTIFY_OCCURRED_AT_MAX_SKEW", 60.0, minimum=0)
# A delivery is not handed to its provider while an earlier one to the same person on
# the same channel is on its way: it is looked at again after a short countdown that
# grows with the wait, and goes anyway once held this long (seconds).
NOTIFY_ORDER_WAIT_MAX = env_float("NOTIFY_ORDER_WAIT_MAX", 30.0, minimum=0)
NOTIFY_ORDER_RECHECK = env_float("NOTIFY_ORDER_RECHECK", 0.1, minimum=0.01)
# --- Email over SMTP --------------------------------------------------------------------
EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
EMAIL_HOST = env_str("EMAIL_HOST", "127.0.0.1")
EMAIL_PORT = env_int("EMAIL_PORT", 1025, minimum=1)
EMAIL_HOST_USER = env_str("EMAIL_HOST_USER", "")
EMAIL_HOST_PASSWORD = secret_text("EMAIL_HOST_PASSWORD")
EMAIL_USE_TLS = env_bool("EMAIL_USE_TLS", False)
EMAIL_USE_SSL = env_bool("EMAIL_USE_SSL", False)
EMAIL_TIMEOUT = env_float("EMAIL_TIMEOUT", 10.0, minimum=0.1)
DEFAULT_FROM_EMAIL = env_str("DEFAULT_FROM_EMAIL", "Notify <notify@localhost>")
# A sender thread keeps its SMTP session open between sends; one idle longer than this
# is reopened first (relays close idle sessions after a minute or more).
NOTIFY_SMTP_KEEP_IDLE_SECONDS = env_float("NOTIFY_SMTP_KEEP_IDLE_SECONDS", 30.0, minimum=0)
NOTIFY_EMAIL_MESSAGE_ID_DOMAIN = env_str("NOTIFY_EMAIL_MESSAGE_ID_DOMAIN", "notify.localhost")
# --- Push: devices, Web Push, FCM, the live stream -----------------------------------------
# VAPID private key (PEM text or a path to it) and the contact the push services see.
WEBPUSH_VAPID_PRIVATE_KEY = secret_text("WEBPUSH_VAPID_PRIVATE_KEY").strip()
WEBPUSH_VAPID_SUBJECT = env_str("WEBPUSH_VAPID_SUBJECT", "mailto:ops@notify.localhost")
# A signed VAPID JWT is reused for this long (push services accept up to 24 h).
WEBPUSH_VAPID_JWT_LIFETIME = env_int("WEBPUSH_VAPID_JWT_LIFETIME", 12 * 3600, minimum=60)
# Push endpoints are given to us by browsers (i.e. by anyone): we post only to these
# origins (`scheme://host[:port]`, `*.` for any subdomain), so a registration cannot aim
# our workers at internal hosts. An address that resolves to loopback, private or
# link-local space is refused unless its origin is listed exactly (a local push peer).
WEBPUSH_ALLOWED_ORIGINS = env_list(
    "WEBPUSH_ALLOWED_ORIGINS",
    [
        "https://fcm.googleapis.com",  # Chrome, Edge (Chromium), Opera
        "https://updates.push.services.mozilla.com",  # Firefox
        "https://*.notify.windows.com",  # legacy Edge / Windows
        "https://web.push.apple.com",  # Safari
        "https://*.push.apple.com",
    ],
)
# Only this much of a push service's answer is read (it lands in last_error).
WEBPUSH_MAX_RESPONSE_BYTES = env_int("WEBPUSH_MAX_RESPONSE_BYTES", 4096, minimum=64)
# A provider's Retry-After is believed up to this many seconds (the longest TTL, 28 days):
# a huge value would overflow the date arithmetic; past the deadline the push expires.
NOTIFY_PUSH_RETRY_AFTER_MAX = env_float("NOTIFY_PUSH_RETRY_AFTER_MAX", 28 * 24 * 3600.0, minimum=1)
# Largest clear-text payload one aes128gcm record can carry (4096 - 103 bytes overhead).
WEBPUSH_MAX_PAYLOAD_BYTES = env_int("WEBPUSH_MAX_PAYLOAD_BYTES", 3993, minimum=64)
# Path to a service-account JSON for FCM; empty disables the channel.
FCM_CREDENTIALS = env_str("FCM_CREDENTIALS", "")
# Override of FCM's send URL ({project_id} is filled in): an emulator or a test peer.
FCM_SEND_URL = env_str("FCM_SEND_URL", "")
# FCM deliveries per send message and per send_each call (FCM allows at most 500).
NOTIFY_FCM_BATCH_SIZE = env_int("NOTIFY_FCM_BATCH_SIZE", 500, minimum=1)
# Push retry policy: base doubling per attempt up to the ceiling, jittered; the
# provider's Retry-After wins when longer; the notification's TTL is the deadline.
NOTIFY_PUSH_RETRY_BASE = env_float("NOTIFY_PUSH_RETRY_BASE", 30.0, minimum=0.01)
NOTIFY_PUSH_RETRY_MAX = env_float("NOTIFY_PUSH_RETRY_MAX", 3600.0, minimum=0.01)
# Provider call timeouts: vendors answer in seconds; these cap a stuck sender.
NOTIFY_PUSH_CONNECT_TIMEOUT = env_float("NOTIFY_PUSH_CONNECT_TIMEOUT", 3.0, minimum=0.1)
NOTIFY_PUSH_REQUEST_TIMEOUT = env_float("NOTIFY_PUSH_REQUEST_TIMEOUT", 5.0, minimum=0.1)
# The timeouts above are per read: a peer that drips a byte at a time never trips them.
# Every provider call also has a total deadline (seconds, NOTIFY_CALL_DEADLINE_<PROVIDER>):
# past it the call is cut off and ends as a transient failure (a timeout). SMPP needs
# none: its submits wait at most SMPP_RESPONSE_TIMEOUT for the answer on the bind.
NOTIFY_PROVIDER_CALL_DEADLINES = {
    provider: env_float(f"NOTIFY_CALL_DEADLINE_{provider.upper()}", default, minimum=0.1)
    for provider, default in {"webpush": 10.0, "fcm": 10.0, "smtp": 30.0}.items()
}
# Only this much of an FCM answer is read (its error bodies are well under 2 KiB).
NOTIFY_FCM_MAX_RESPONSE_BYTES = env_int("NOTIFY_FCM_MAX_RESPONSE_BYTES", 16384, minimum=1024)
# Web Push and FCM senders per worker process (each; see channel isolation below).
NOTIFY_PUSH_SENDERS = env_int("NOTIFY_PUSH_SENDERS", 8, minimum=1)
# At most this many push jobs per recipient queued + in flight (push fairness).
NOTIFY_PUSH_PER_RECIPIENT_LIMIT = env_int("NOTIFY_PUSH_PER_RECIPIENT_LIMIT", 4, minimum=1)
# Over the limit, a recipient's browsers take turns for the slots (the one served least
# recently goes first); each browser's last turn is remembered this long (seconds) after
# the recipient's last push, then the turns start again from the oldest device.
NOTIFY_PUSH_TURN_MEMORY_SECONDS = env_int(
    "NOTIFY_PUSH_TURN_MEMORY_SECONDS", 30 * 24 * 3600, minimum=60
)
# Dropped pushes are logged as one summed line at most this often (seconds).
NOTIFY_PUSH_DROP_LOG_INTERVAL = env_int("NOTIFY_PUSH_DROP_LOG_INTERVAL", 60, minimum=1)
# Live stream: heartbeat comment interval and how long a device counts as live
# without a heartbeat (seconds). A stream is woken by Redis pub/sub when an entry is
# written; it also reads the feed every NOTIFY_STREAM_SAFETY_POLL (a lost wake-up costs
# at most that), and every NOTIFY_STREAM_POLL_INTERVAL while Redis is unreachable.
NOTIFY_STREAM_HEARTBEAT = env_float("NOTIFY_STREAM_HEARTBEAT", 15.0, minimum=0.1)
NOTIFY_LIVE_TTL = env_int("NOTIFY_LIVE_TTL", 45, minimum=1)
NOTIFY_STREAM_SAFETY_POLL = env_float("NOTIFY_STREAM_SAFETY_POLL", 15.0, minimum=0.1)
NOTIFY_STREAM_POLL_INTERVAL = env_float("NOTIFY_STREAM_POLL_INTERVAL", 1.0, minimum=0.05)
# How many missed entries a reconnect with Last-Event-ID replays at most.
NOTIFY_STREAM_REPLAY_MAX = env_int("NOTIFY_STREAM_REPLAY_MAX", 100, minimum=1)
# Open streams allowed at once per user and per API key; the next one gets 429.
NOTIFY_STREAM_MAX_PER_USER = env_int("NOTIFY_STREAM_MAX_PER_USER", 5, minimum=1)
NOTIFY_STREAM_MAX_PER_KEY = env_int("NOTIFY_STREAM_MAX_PER_KEY", 1000, minimum=1)
# A stream ends after this long (seconds, shortened by up to the jitter fraction); the
# client reconnects and is authenticated again, so a revoked key stops streaming.
NOTIFY_STREAM_MAX_LIFETIME = env_float("NOTIFY_STREAM_MAX_LIFETIME", 3600.0, minimum=1)
# The SSE `retry:` reconnect advice (milliseconds), spread by ±the jitter fraction.
NOTIFY_STREAM_RETRY_MS = env_int("NOTIFY_STREAM_RETRY_MS", 3000, minimum=1)
NOTIFY_STREAM_RETRY_JITTER = env_float("NOTIFY_STREAM_RETRY_JITTER", 0.5, minimum=0)
# Connections in the one Redis pool a web process's streams share (each open stream
# holds one for its pub/sub); past it a stream falls back to polling the database.
NOTIFY_STREAM_REDIS_MAX_CONNECTIONS = env_int(
    "NOTIFY_STREAM_REDIS_MAX_CONNECTIONS", 1000, minimum=2
)
# A push is skipped for a live device only when the notification's feed entry was
# written to that device's stream: the stream remembers what it wrote for this long
# (seconds), and the push sender waits at most NOTIFY_LIVE_SEEN_WAIT (seconds) for the
# stream to write an entry that exists but is not out yet; after that it pushes.
NOTIFY_LIVE_SEEN_TTL = env_int("NOTIFY_LIVE_SEEN_TTL", 3600, minimum=1)
NOTIFY_LIVE_SEEN_WAIT = env_float("NOTIFY_LIVE_SEEN_WAIT", 2.0, minimum=0.0)
# --- SMS over SMPP -------------------------------------------------------------------------
# The SMSC and our account there (DESIGN.md §12 names). One bind_transceiver per sender
# process; its deliver_sm receipts arrive on the same bind.
SMPP_HOST = env_str("SMPP_HOST", "127.0.0.1")
SMPP_PORT = env_int("SMPP_PORT", 2775, minimum=1)
SMPP_SYSTEM_ID = env_str("SMPP_SYSTEM_ID", "notify")
SMPP_PASSWORD = secret_text("SMPP_PASSWORD").strip()
SMPP_SYSTEM_TYPE = env_str("SMPP_SYSTEM_TYPE", "")
# The sender id the phone shows (an alphanumeric name or a number).
SMPP_SOURCE_ADDR = env_str("SMPP_SOURCE_ADDR", "Notify")
# Keep-alive: SMSCs drop a bind after ~120 s without a PDU; 30-60 s is the working range.
SMPP_ENQUIRE_LINK_INTERVAL = env_float("SMPP_ENQUIRE_LINK_INTERVAL", 45.0, minimum=0.1)
# How long we wait for any *_resp (bind, submit, enquire_link) before the bind is suspect.
SMPP_RESPONSE_TIMEOUT = env_float("SMPP_RESPONSE_TIMEOUT", 10.0, minimum=0.1)
# A send waits this long for the bind to come (back) up before it is a transient failure.
SMPP_BIND_WAIT = env_float("SMPP_BIND_WAIT", 5.0, minimum=0)
# Reconnect backoff after a lost or refused bind: base doubling to the ceiling, jittered.
SMPP_RECONNECT_BASE = env_float("SMPP_RECONNECT_BASE", 1.0, minimum=0.01)
SMPP_RECONNECT_MAX = env_float("SMPP_RECONNECT_MAX", 60.0, minimum=0.01)
# Unacknowledged submit_sm per bind (window) and submits per second per bind (TPS). With
# several sender processes, per-bind TPS times binds must stay within the account's TPS.
SMPP_WINDOW_SIZE = env_int("SMPP_WINDOW_SIZE", 10, minimum=1)
SMPP_TPS = env_float("SMPP_TPS", 30.0, minimum=0.01)
# Throttling (0x58): pause base doubling to the ceiling, ± jitter, this many retries
# inside one send; then the delivery is dead.
SMPP_THROTTLE_PAUSE = env_float("SMPP_THROTTLE_PAUSE", 0.1, minimum=0)
SMPP_THROTTLE_PAUSE_MAX = env_float("SMPP_THROTTLE_PAUSE_MAX", 5.0, minimum=0)
SMPP_THROTTLE_JITTER = env_float("SMPP_THROTTLE_JITTER", 0.2, minimum=0)
SMPP_THROTTLE_RETRIES = env_int("SMPP_THROTTLE_RETRIES", 3, minimum=0)
# Sustained throttling (this many 0x58 within the window) halves the bind's rate, at most
# once per step interval, never below the floor; after a quiet period without 0x58 the
# rate climbs back by a fraction of SMPP_TPS per step interval (no see-saw).
SMPP_THROTTLE_SUSTAINED_COUNT = env_int("SMPP_THROTTLE_SUSTAINED_COUNT", 3, minimum=1)
SMPP_THROTTLE_SUSTAINED_WINDOW = env_float("SMPP_THROTTLE_SUSTAINED_WINDOW", 10.0, minimum=0.01)
SMPP_RATE_STEP_INTERVAL = env_float("SMPP_RATE_STEP_INTERVAL", 5.0, minimum=0.01)
SMPP_RATE_RECOVER_AFTER = env_float("SMPP_RATE_RECOVER_AFTER", 30.0, minimum=0.01)
SMPP_RATE_RECOVER_STEP = env_float("SMPP_RATE_RECOVER_STEP", 0.1, minimum=0.01)
SMPP_RATE_FLOOR = env_float("SMPP_RATE_FLOOR", 1.0, minimum=0.01)
# Long text: "udh" (concatenated parts with a user data header, the most widely
# supported) or "payload" (one submit_sm with the message_payload TLV).
SMPP_LONG_MESSAGE_MODE = env_str("SMPP_LONG_MESSAGE_MODE", "udh")
if SMPP_LONG_MESSAGE_MODE not in ("udh", "payload"):
    raise ImproperlyConfigured(
        f"SMPP_LONG_MESSAGE_MODE must be 'udh' or 'payload', not {SMPP_LONG_MESSAGE_MODE!r}"
    )
# Segment sizes (GSM 03.38 / 03.40): one part, and each part of a concatenated message.
SMPP_GSM7_SINGLE_CHARS = env_int("SMPP_GSM7_SINGLE_CHARS", 160, minimum=1)
SMPP_GSM7_PART_CHARS = env_int("SMPP_GSM7_PART_CHARS", 153, minimum=1)
SMPP_UCS2_SINGLE_CHARS = env_int("SMPP_UCS2_SINGLE_CHARS", 70, minimum=1)
SMPP_UCS2_PART_CHARS = env_int("SMPP_UCS2_PART_CHARS", 67, minimum=1)
# A receipt for a message id no delivery has yet (the send is still being recorded) is
# looked up again this many times, this far apart, before the SMSC is asked to resend it.
SMPP_DLR_MATCH_RETRIES = env_int("SMPP_DLR_MATCH_RETRIES", 5, minimum=0)
SMPP_DLR_MATCH_DELAY = env_float("SMPP_DLR_MATCH_DELAY", 0.2, minimum=0)

# --- Fallback channel ----------------------------------------------------------------------
# A delivery on these channels that ends dead is followed by the category's fallback
# channel (Category.fallback_channel), through the gate.
NOTIFY_FALLBACK_FROM_CHANNELS = env_list("NOTIFY_FALLBACK_FROM_CHANNELS", ["sms"])
# --- Channels ------------------------------------------------------------------------
# Channels with a working provider here; others are recorded as suppressed, not tried.
# Unset: in-app and email, plus Web Push once a VAPID key is set, FCM once its
# credentials are, and SMS once SMPP_HOST is set in the environment (its default above
# only names a local SMSC, which is no sign one is there). An explicit list wins.
NOTIFY_CHANNELS_ENABLED = env_list(
    "NOTIFY_CHANNELS_ENABLED",
    ["inapp", "email"]
    + (["webpush"] if WEBPUSH_VAPID_PRIVATE_KEY else [])
    + (["fcm"] if FCM_CREDENTIALS else [])
    + (["sms"] if "SMPP_HOST" in os.environ else []),
)

# --- Templates and rendering ---------------------------------------------------------------
# Channel limits checked when a template is saved and applied when rendering.
NOTIFY_PUSH_TITLE_MAX_CHARS = env_int("NOTIFY_PUSH_TITLE_MAX_CHARS", 50, minimum=1)
NOTIFY_PUSH_BODY_MAX_CHARS = env_int("NOTIFY_PUSH_BODY_MAX_CHARS", 150, minimum=2)
NOTIFY_SMS_MAX_SEGMENTS = env_int("NOTIFY_SMS_MAX_SEGMENTS", 3, minimum=1)
# Used by the money filter when the payload names no currency.
NOTIFY_DEFAULT_CURRENCY = env_str("NOTIFY_DEFAULT_CURRENCY", "EUR")
NOTIFY_DEFAULT_TIMEZONE = env_str("NOTIFY_DEFAULT_TIMEZONE", "UTC")
# Rendering bounds, the same in validation, preview and sending (one field at a time):
# past them the render stops; at send the delivery fails with reason `render_limit`.
NOTIFY_TEMPLATE_RENDER_SECONDS = env_float("NOTIFY_TEMPLATE_RENDER_SECONDS", 1.0, minimum=0.01)
NOTIFY_TEMPLATE_MAX_OUTPUT_CHARS = env_int("NOTIFY_TEMPLATE_MAX_OUTPUT_CHARS", 262144, minimum=1024)
# Loops inside loops inside loops cost the product of list sizes no sample shows: refused.
NOTIFY_TEMPLATE_MAX_LOOP_DEPTH = env_int("NOTIFY_TEMPLATE_MAX_LOOP_DEPTH", 2, minimum=1)
# floatformat precision, and the exponent of any number a filter formats.
NOTIFY_TEMPLATE_MAX_DECIMALS = env_int("NOTIFY_TEMPLATE_MAX_DECIMALS", 20, minimum=0)
NOTIFY_TEMPLATE_MAX_NUMBER_DIGITS = env_int("NOTIFY_TEMPLATE_MAX_NUMBER_DIGITS", 100, minimum=20)

# --- Preferences, consent, quiet hours, caps, user tokens ----------------------------------
# Unsubscribe links must keep working in old emails: two years by default.
NOTIFY_UNSUBSCRIBE_TOKEN_MAX_AGE = env_int(
    "NOTIFY_UNSUBSCRIBE_TOKEN_MAX_AGE", 2 * 365 * 24 * 3600, minimum=1
)
NOTIFY_USER_TOKEN_TTL_SECONDS = env_int("NOTIFY_USER_TOKEN_TTL_SECONDS", 3600, minimum=1)
# Default quiet window in the recipient's local time (HH:MM); per recipient in admin.
NOTIFY_QUIET_HOURS_START = env_str("NOTIFY_QUIET_HOURS_START", "21:00")
NOTIFY_QUIET_HOURS_END = env_str("NOTIFY_QUIET_HOURS_END", "09:00")
NOTIFY_MARKETING_DAILY_CAP = env_int("NOTIFY_MARKETING_DAILY_CAP", 3, minimum=1)
NOTIFY_CONSENT_TEXT_VERSION = env_str("NOTIFY_CONSENT_TEXT_VERSION", "v1")
NOTIFY_DEFERRED_RELEASE_INTERVAL = env_float("NOTIFY_DEFERRED_RELEASE_INTERVAL", 30.0, minimum=1)
NOTIFY_DEFERRED_RELEASE_BATCH = env_int("NOTIFY_DEFERRED_RELEASE_BATCH", 500, minimum=1)
# --- Provider pressure: rate limits and circuit breakers -----------------------------------
# Which provider each channel talks to; limits and breakers are per provider.
NOTIFY_CHANNEL_PROVIDERS = {
    "email": "smtp",
    "webpush": "webpush",
    "fcm": "fcm",
    "sms": "smpp",
}
# Per-provider token buckets, "rate/s:burst", shared by every worker through Redis.
NOTIFY_PROVIDER_RATE_LIMITS = {
    provider: env_str(f"NOTIFY_RATE_{provider.upper()}", default)
    for provider, default in {
        "smtp": "50:100",
        "webpush": "200:400",
        "fcm": "500:1000",
        "smpp": "30:30",
    }.items()
}
# Low-priority traffic may only take tokens while this fraction of the bucket remains,
# so a saturating campaign leaves room for login codes (high uses under 80 %).
NOTIFY_LOW_PRIORITY_RESERVE = env_float("NOTIFY_LOW_PRIORITY_RESERVE", 0.2, minimum=0)
# A sender waits for a token at most this long in place; longer → short countdown.
NOTIFY_RATE_MAX_INLINE_WAIT = env_float("NOTIFY_RATE_MAX_INLINE_WAIT", 0.25, minimum=0)
NOTIFY_BREAKER_FAILURES = env_int("NOTIFY_BREAKER_FAILURES", 10, minimum=1)
NOTIFY_BREAKER_WINDOW = env_float("NOTIFY_BREAKER_WINDOW", 30.0, minimum=0.1)
NOTIFY_BREAKER_COOLDOWN = env_float("NOTIFY_BREAKER_COOLDOWN", 30.0, minimum=0.1)
# How long a half-open probe may take before another sender may probe instead.
NOTIFY_BREAKER_PROBE_TIMEOUT = env_float("NOTIFY_BREAKER_PROBE_TIMEOUT", 15.0, minimum=0.1)

# --- Feed and unread counter (R-U) ----------------------------------------------------
NOTIFY_FEED_PAGE_SIZE = env_int("NOTIFY_FEED_PAGE_SIZE", 20, minimum=1)
NOTIFY_FEED_MAX_PAGE_SIZE = env_int("NOTIFY_FEED_MAX_PAGE_SIZE", 100, minimum=1)
NOTIFY_UNREAD_RECONCILE_INTERVAL = env_float("NOTIFY_UNREAD_RECONCILE_INTERVAL", 300.0, minimum=1)
# Recipients whose feed changed within this window are reconciled each run.
NOTIFY_UNREAD_RECONCILE_WINDOW = env_float("NOTIFY_UNREAD_RECONCILE_WINDOW", 3600.0, minimum=1)

# --- Support pages -------------------------------------------------------------------------
NOTIFY_SUPPORT_TIMELINE_PAGE_SIZE = env_int("NOTIFY_SUPPORT_TIMELINE_PAGE_SIZE", 25, minimum=1)

# --- Operations: health, readiness, metrics ------------------------------------------------
# Bearer token for GET /metrics. Empty: /metrics answers only requests from loopback
# (a scraper on the same host or a sidecar); any other client gets 403.
NOTIFY_METRICS_TOKEN = secret_text("NOTIFY_METRICS_TOKEN").strip()
# Each dependency check in /readyz (and each source read by /metrics) gives up after this.
NOTIFY_OPS_CHECK_TIMEOUT = env_float("NOTIFY_OPS_CHECK_TIMEOUT", 1.0, minimum=0.05)
# Upper bounds (seconds) of the event→delivery latency histogram buckets.
NOTIFY_METRICS_LATENCY_BUCKETS = env_float_list(
    "NOTIFY_METRICS_LATENCY_BUCKETS", [0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0, 1800.0, 3600.0]
)
# The latency histogram covers deliveries finished within this window, so a scrape
# reads a bounded slice of the table instead of all history.
NOTIFY_METRICS_LATENCY_WINDOW = env_float("NOTIFY_METRICS_LATENCY_WINDOW", 3600.0, minimum=1)
# Beat folds what changed into the metrics rollups this often (seconds); a scrape reads
# the rollups plus what changed since, so this bounds the work of a scrape.
NOTIFY_METRICS_FOLD_INTERVAL = env_float("NOTIFY_METRICS_FOLD_INTERVAL", 15.0, minimum=1)
# Rows per fold statement, and at most this many per run (the rest waits for the next).
NOTIFY_METRICS_FOLD_BATCH = env_int("NOTIFY_METRICS_FOLD_BATCH", 2000, minimum=1)
NOTIFY_METRICS_FOLD_LIMIT = env_int("NOTIFY_METRICS_FOLD_LIMIT", 200_000, minimum=1)
# Sources /metrics reads besides the database, broker and Redis ones, by dotted path:
# apps above the one that serves /metrics report here without it importing them.
NOTIFY_METRICS_SOURCES = {"history": "history.metrics.history_metrics"}

# --- Campaigns -----------------------------------------------------------------------
# Recipients fanned out per batch: one INSERT … SELECT for their notifications, one for
# their outbox rows, then the fan-out task yields (it re-publishes itself on `low`).
NOTIFY_CAMPAIGN_BATCH_SIZE = env_int("NOTIFY_CAMPAIGN_BATCH_SIZE", 2000, minimum=1)
# A campaign's admin page refreshes its progress this often (seconds) while it can change.
NOTIFY_CAMPAIGN_PROGRESS_POLL = env_float("NOTIFY_CAMPAIGN_PROGRESS_POLL", 2.0, minimum=0.1)
# A user-id audience given in one request holds at most this many ids.
NOTIFY_CAMPAIGN_MAX_USER_IDS = env_int("NOTIFY_CAMPAIGN_MAX_USER_IDS", 100_000, minimum=1)
# A CSV uploaded in admin holds at most this many user ids (read as a stream, loaded
# with COPY; never held in memory).
NOTIFY_CAMPAIGN_MAX_UPLOAD_IDS = env_int("NOTIFY_CAMPAIGN_MAX_UPLOAD_IDS", 1_000_000, minimum=1)
# The fan-out's own message priority: below a first attempt's, so the route tasks of one
# batch go before the next batch is made (the campaign paces itself to routing).
NOTIFY_CAMPAIGN_FAN_OUT_PRIORITY = env_int("NOTIFY_CAMPAIGN_FAN_OUT_PRIORITY", 1, minimum=0)
# Beat: how often scheduled campaigns are started, and after how long without a batch a
# running campaign's fan-out counts as lost (its message or worker) and is published again.
NOTIFY_CAMPAIGN_START_INTERVAL = env_float("NOTIFY_CAMPAIGN_START_INTERVAL", 5.0, minimum=1)
NOTIFY_CAMPAIGN_STALL_SECONDS = env_float("NOTIFY_CAMPAIGN_STALL_SECONDS", 600.0, minimum=1)

# --- History: monthly partitions, retention, archive --------------------------------------
# Notifications, deliveries, attempts and feed entries are partitioned by UTC month of the
# notification's acceptance; this many months ahead always exist (docs/history.md).
NOTIFY_PARTITIONS_AHEAD = env_int("NOTIFY_PARTITIONS_AHEAD", 3, minimum=1)
# Months that ended more than this many days ago are archived, verified and dropped.
NOTIFY_RETENTION_DAYS = env_int("NOTIFY_RETENTION_DAYS", 90, minimum=1)
# Where archived months go: a local directory, or any fsspec URL (s3://bucket/notify, …).
NOTIFY_ARCHIVE_URL = env_str("NOTIFY_ARCHIVE_URL", str(BASE_DIR / "var" / "archive"))
# Rows per batch when a month is written to (or read from) the archive: bounds memory.
NOTIFY_ARCHIVE_BATCH_ROWS = env_int("NOTIFY_ARCHIVE_BATCH_ROWS", 10_000, minimum=100)
# Seconds retention waits for the lock that dropping a month's partitions needs; past it
# the month is tried again on the next run rather than holding up intake.
NOTIFY_RETENTION_DROP_LOCK_TIMEOUT = env_float(
    "NOTIFY_RETENTION_DROP_LOCK_TIMEOUT", 10.0, minimum=0.1
)
# A month restored for support is dropped again (not re-archived) after this many days.
NOTIFY_RESTORE_KEEP_DAYS = env_int("NOTIFY_RESTORE_KEEP_DAYS", 7, minimum=1)
# Beat: how often partitions are ensured and retention runs.
NOTIFY_HISTORY_MAINTENANCE_INTERVAL = env_float(
    "NOTIFY_HISTORY_MAINTENANCE_INTERVAL", 3600.0, minimum=1
)

# --- Periodic jobs (celery beat) ------------------------------------------------------
# Several beat processes may run (one per host); exactly one schedules. celery-redbeat
# elects it with a lock in Redis that expires unless its holder renews it; the others
# wait for it, and one of them takes over within NOTIFY_BEAT_LOCK_TIMEOUT +
# NOTIFY_BEAT_MAX_LOOP_INTERVAL of the leader's death (within the interval alone when
# the leader stops cleanly and releases the lock).
# The schedule's state (when each job last ran) is in Redis too, so the new leader goes
# on where the old one stopped. notify/celery.py: LeaderBeatScheduler.
CELERY_BEAT_SCHEDULER = "notify.celery:LeaderBeatScheduler"
# celery-redbeat reads its settings under their own names (REDBEAT_*), outside Celery's
# CELERY_ namespace: with the prefix it would not see them and fall back to the broker's.
REDBEAT_REDIS_URL = REDIS_URL
REDBEAT_KEY_PREFIX = env_str("NOTIFY_BEAT_KEY_PREFIX", "notify:beat:")
# Seconds the leader's lock lives without renewal. The leader renews it before every
# publish, so a publish that gets its confirm (NOTIFY_BROKER_CONFIRM_TIMEOUT at most)
# ends while the lock still holds; only a broker that hangs through kombu's publish
# retries could let it outlive the lock and overlap the next leader's first publish (of
# jobs that are all safe to run twice).
NOTIFY_BEAT_LOCK_TIMEOUT = env_float("NOTIFY_BEAT_LOCK_TIMEOUT", 20.0, minimum=1)
# The longest beat sleeps between two looks at its schedule, and how often a waiting
# beat tries the lock (seconds).
NOTIFY_BEAT_MAX_LOOP_INTERVAL = env_float("NOTIFY_BEAT_MAX_LOOP_INTERVAL", 2.0, minimum=0.1)
if NOTIFY_BEAT_LOCK_TIMEOUT <= NOTIFY_BROKER_CONFIRM_TIMEOUT + NOTIFY_BEAT_MAX_LOOP_INTERVAL:
    raise ImproperlyConfigured(
        "NOTIFY_BEAT_LOCK_TIMEOUT must exceed NOTIFY_BROKER_CONFIRM_TIMEOUT plus "
        "NOTIFY_BEAT_MAX_LOOP_INTERVAL: a leader must finish a publish before its lock lapses"
    )
REDBEAT_LOCK_TIMEOUT = NOTIFY_BEAT_LOCK_TIMEOUT
CELERY_BEAT_MAX_LOOP_INTERVAL = NOTIFY_BEAT_MAX_LOOP_INTERVAL
# Redis is asked with these timeouts (seconds), so a Redis that hangs makes the leader
# give up (and exit) rather than publish on a lock it can no longer renew.
NOTIFY_BEAT_REDIS_TIMEOUT = env_float("NOTIFY_BEAT_REDIS_TIMEOUT", 5.0, minimum=0.1)
REDBEAT_REDIS_OPTIONS = {
    "socket_timeout": NOTIFY_BEAT_REDIS_TIMEOUT,
    "socket_connect_timeout": NOTIFY_BEAT_REDIS_TIMEOUT,
}
# A periodic job that beat has not sent for this many of its intervals is overdue:
# `manage.py beat_check` fails naming it, and /metrics and admin show it.
NOTIFY_BEAT_OVERDUE_FACTOR = env_float("NOTIFY_BEAT_OVERDUE_FACTOR", 3.0, minimum=1)
# Maintenance runs on `high`: it is small, and recovery must not wait behind a campaign.
CELERY_BEAT_SCHEDULE = {
    "retry-sweep": {
        "task": "deliveries.sweep_due_retries",
        "schedule": NOTIFY_RETRY_SWEEP_INTERVAL,
        "options": {"queue": "high", "confirm_timeout": NOTIFY_BROKER_CONFIRM_TIMEOUT},
    },
    "route-sweep": {
        "task": "deliveries.sweep_unrouted",
        "schedule": NOTIFY_ROUTE_SWEEP_INTERVAL,
        "options": {"queue": "high", "confirm_timeout": NOTIFY_BROKER_CONFIRM_TIMEOUT},
    },
    "release-deferred": {
        "task": "deliveries.release_deferred",
        "schedule": NOTIFY_DEFERRED_RELEASE_INTERVAL,
        "options": {"queue": "high", "confirm_timeout": NOTIFY_BROKER_CONFIRM_TIMEOUT},
    },
    "unread-reconcile": {
        "task": "notify.reconcile_unread_counts",
        "schedule": NOTIFY_UNREAD_RECONCILE_INTERVAL,
        "options": {"queue": "high", "confirm_timeout": NOTIFY_BROKER_CONFIRM_TIMEOUT},
    },
    "campaigns-start-due": {
        "task": "campaigns.start_due",
        "schedule": NOTIFY_CAMPAIGN_START_INTERVAL,
        "options": {"queue": "high", "confirm_timeout": NOTIFY_BROKER_CONFIRM_TIMEOUT},
    },
    # Partitions ahead on `high` (small, and a missing month sends rows to the default
    # partition); retention's exports are long and go on `low`, after the campaigns.
    "history-partitions": {
        "task": "history.partitions_ensure",
        "schedule": NOTIFY_HISTORY_MAINTENANCE_INTERVAL,
        "options": {"queue": "high", "confirm_timeout": NOTIFY_BROKER_CONFIRM_TIMEOUT},
    },
    "history-retention": {
        "task": "history.retention_run",
        "schedule": NOTIFY_HISTORY_MAINTENANCE_INTERVAL,
        "options": {"queue": "low", "confirm_timeout": NOTIFY_BROKER_CONFIRM_TIMEOUT},
    },
    # A run that waited longer than one interval is dropped: the next one does its work.
    "metrics-counts-fold": {
        "task": "deliveries.metrics_counts_fold",
        "schedule": NOTIFY_METRICS_FOLD_INTERVAL,
        "options": {
            "queue": "high",
            "expires": NOTIFY_METRICS_FOLD_INTERVAL,
            "confirm_timeout": NOTIFY_BROKER_CONFIRM_TIMEOUT,
        },
    },
}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {
        "plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"},
    },
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": env_str("LOG_LEVEL", "INFO")},
    # Celery's own "received"/"succeeded" lines cost a worker about a tenth of its
    # throughput, twice per event; the delivery outcome line says what happened instead.
    # NOTIFY_LOG_TASKS=1 brings them back.
    "loggers": {
        name: {"level": "INFO" if env_bool("NOTIFY_LOG_TASKS", False) else "WARNING"}
        for name in ("celery.app.trace", "celery.worker.strategy")
    },
}

# --- Channel isolation: each channel's own share of a worker's senders -----------------
# (deliveries/pipeline/senders.py, docs/pipeline.md.) A worker process's threads, as
# scripts/worker.sh gives them to Celery (it exports WORKER_CONCURRENCY).
NOTIFY_WORKER_THREADS = env_int("WORKER_CONCURRENCY", 8, minimum=1)
# At most this many of them send for one channel at once in one queue class, and never
# more than half of them, so every other channel keeps the rest. The push channels take
# NOTIFY_PUSH_SENDERS each (give the worker twice as many threads for all of them).
NOTIFY_CHANNEL_SENDERS = {
    "email": env_int("NOTIFY_EMAIL_SENDERS", 4, minimum=1),
    "sms": env_int("NOTIFY_SMS_SENDERS", 4, minimum=1),
    "webpush": NOTIFY_PUSH_SENDERS,
    "fcm": NOTIFY_PUSH_SENDERS,
}
# A channel is slow while its provider calls take longer than this on average (seconds),
# or one has been running longer; while slow it has at most NOTIFY_CHANNEL_SLOW_SENDERS.
NOTIFY_CHANNEL_SLOW_SECONDS = env_float("NOTIFY_CHANNEL_SLOW_SECONDS", 3.0, minimum=0.01)
NOTIFY_CHANNEL_SLOW_SENDERS = env_int("NOTIFY_CHANNEL_SLOW_SENDERS", 2, minimum=1)
# A send that finds its channel's slots taken comes back after this long (seconds), or
# after about one call's time while the channel is slow, at most the max.
NOTIFY_CHANNEL_DEFER = env_float("NOTIFY_CHANNEL_DEFER", 1.0, minimum=0.1)
NOTIFY_CHANNEL_DEFER_MAX = env_float("NOTIFY_CHANNEL_DEFER_MAX", 30.0, minimum=1)
