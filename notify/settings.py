"""Django settings for Notify.

Everything comes from the environment, with defaults that point at the local
PostgreSQL, RabbitMQ and Redis on their standard ports. Every number that DESIGN.md
names is a setting here (prefix NOTIFY_), read once at start.
"""

from __future__ import annotations

from pathlib import Path

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
SECRET_KEY = env_str("DJANGO_SECRET_KEY", "dev-only-insecure-key-change-me-in-any-deployment")
ALLOWED_HOSTS = env_list("DJANGO_ALLOWED_HOSTS", ["127.0.0.1", "localhost", "testserver", "web"])
CSRF_TRUSTED_ORIGINS = env_list("DJANGO_CSRF_TRUSTED_ORIGINS", [])
# Absolute base for links we put in messages (unsubscribe, tracking).
NOTIFY_PUBLIC_URL = env_url(
    "NOTIFY_PUBLIC_URL", "http://127.0.0.1:8000", schemes=("http", "https")
).rstrip("/")

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "drf_spectacular",
    "notify",
    "preferences",
    "templates_admin",
    "deliveries",
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

DATABASES = {
    "default": {
        **database_from_url("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/notify"),
        "CONN_MAX_AGE": env_int("DATABASE_CONN_MAX_AGE", 60, minimum=0),
        "CONN_HEALTH_CHECKS": True,
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

# --- Email (SMTP) --------------------------------------------------------------------
EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
EMAIL_HOST = env_str("EMAIL_HOST", "127.0.0.1")
EMAIL_PORT = env_int("EMAIL_PORT", 1025, minimum=1)
EMAIL_HOST_USER = env_str("EMAIL_HOST_USER", "")
EMAIL_HOST_PASSWORD = secret_text("EMAIL_HOST_PASSWORD")
EMAIL_USE_TLS = env_bool("EMAIL_USE_TLS", False)
EMAIL_USE_SSL = env_bool("EMAIL_USE_SSL", False)
EMAIL_TIMEOUT = env_float("EMAIL_TIMEOUT", 10.0, minimum=0.1)
DEFAULT_FROM_EMAIL = env_str("DEFAULT_FROM_EMAIL", "Notify <notify@localhost>")

# --- REST API -------------------------------------------------------------------------
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": ["notify.api.auth.ApiKeyAuthentication"],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_RENDERER_CLASSES": [
        "rest_framework.renderers.JSONRenderer",
        "rest_framework.renderers.BrowsableAPIRenderer",
    ],
    "DEFAULT_PARSER_CLASSES": ["rest_framework.parsers.JSONParser"],
    "EXCEPTION_HANDLER": "notify.api.errors.exception_handler",
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "UNAUTHENTICATED_USER": None,
}
SPECTACULAR_SETTINGS = {
    "TITLE": "Notify API",
    "DESCRIPTION": "Events in; in-app, email, push and SMS notifications out.",
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    "COMPONENT_SPLIT_REQUEST": True,
}

# --- Intake (R-IN) --------------------------------------------------------------------
NOTIFY_MAX_BODY_BYTES = env_int("NOTIFY_MAX_BODY_BYTES", 64 * 1024, minimum=1024)
NOTIFY_API_RATE_PER_SECOND = env_float("NOTIFY_API_RATE_PER_SECOND", 100.0, minimum=0.01)
NOTIFY_API_RATE_BURST = env_int("NOTIFY_API_RATE_BURST", 200, minimum=1)
NOTIFY_DEFAULT_LOCALE = env_str("NOTIFY_DEFAULT_LOCALE", "en")
NOTIFY_DEFAULT_TTL_SECONDS = env_int("NOTIFY_DEFAULT_TTL_SECONDS", 24 * 3600, minimum=1)
NOTIFY_OUTBOX_REPUBLISH_AFTER = env_float("NOTIFY_OUTBOX_REPUBLISH_AFTER", 5.0, minimum=0)
NOTIFY_OUTBOX_SWEEP_INTERVAL = env_float("NOTIFY_OUTBOX_SWEEP_INTERVAL", 5.0, minimum=0.5)
NOTIFY_OUTBOX_SWEEP_BATCH = env_int("NOTIFY_OUTBOX_SWEEP_BATCH", 500, minimum=1)

# --- Queues and retries (R-Q, R-D3) ---------------------------------------------------
NOTIFY_QUEUE_MAX_PRIORITY = env_int("NOTIFY_QUEUE_MAX_PRIORITY", 10, minimum=1)
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

# --- Feed and unread counter (R-U) ----------------------------------------------------
NOTIFY_FEED_PAGE_SIZE = env_int("NOTIFY_FEED_PAGE_SIZE", 20, minimum=1)
NOTIFY_FEED_MAX_PAGE_SIZE = env_int("NOTIFY_FEED_MAX_PAGE_SIZE", 100, minimum=1)
NOTIFY_UNREAD_RECONCILE_INTERVAL = env_float("NOTIFY_UNREAD_RECONCILE_INTERVAL", 300.0, minimum=1)
# Recipients whose feed changed within this window are reconciled each run.
NOTIFY_UNREAD_RECONCILE_WINDOW = env_float("NOTIFY_UNREAD_RECONCILE_WINDOW", 3600.0, minimum=1)

# --- Celery on RabbitMQ (R-Q1, R-Q3) --------------------------------------------------
CELERY_BROKER_URL = env_url(
    "CELERY_BROKER_URL", "amqp://guest:guest@127.0.0.1:5672//", schemes=("amqp", "amqps")
)
NOTIFY_EXCHANGE = Exchange("notify", type="direct", durable=True)
NOTIFY_DEAD_LETTER_EXCHANGE = Exchange("dead_letter", type="direct", durable=True)
NOTIFY_QUEUE_NAMES = ("high", "medium", "low")


def _work_queue(name: str) -> Queue:
    return Queue(
        name,
        NOTIFY_EXCHANGE,
        routing_key=name,
        durable=True,
        queue_arguments={
            "x-max-priority": NOTIFY_QUEUE_MAX_PRIORITY,
            "x-dead-letter-exchange": NOTIFY_DEAD_LETTER_EXCHANGE.name,
            "x-dead-letter-routing-key": "dead_letter",
        },
    )


CELERY_TASK_QUEUES = [
    *(_work_queue(name) for name in NOTIFY_QUEUE_NAMES),
    Queue("dead_letter", NOTIFY_DEAD_LETTER_EXCHANGE, routing_key="dead_letter", durable=True),
]
CELERY_TASK_DEFAULT_QUEUE = "medium"
CELERY_TASK_DEFAULT_EXCHANGE = NOTIFY_EXCHANGE.name
CELERY_TASK_DEFAULT_EXCHANGE_TYPE = "direct"
CELERY_TASK_DEFAULT_ROUTING_KEY = "medium"
CELERY_TASK_CREATE_MISSING_QUEUES = False
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
# Without this a failed task's message is acked and gone instead of dead-lettered.
CELERY_TASK_ACKS_ON_FAILURE_OR_TIMEOUT = False
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_BROKER_TRANSPORT_OPTIONS = {"confirm_publish": True}
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_WORKER_CANCEL_LONG_RUNNING_TASKS_ON_CONNECTION_LOSS = True
CELERY_TASK_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_TASK_IGNORE_RESULT = True
CELERY_WORKER_HIJACK_ROOT_LOGGER = False
CELERY_TASK_TIME_LIMIT = env_int("NOTIFY_TASK_TIME_LIMIT", 300, minimum=1)
CELERY_TASK_SOFT_TIME_LIMIT = env_int("NOTIFY_TASK_SOFT_TIME_LIMIT", 240, minimum=1)
# Maintenance runs on `high`: it is small, and recovery must not wait behind a campaign.
CELERY_BEAT_SCHEDULE = {
    "outbox-republish": {
        "task": "notify.republish_outbox",
        "schedule": NOTIFY_OUTBOX_SWEEP_INTERVAL,
        "options": {"queue": "high"},
    },
    "retry-sweep": {
        "task": "deliveries.sweep_due_retries",
        "schedule": NOTIFY_RETRY_SWEEP_INTERVAL,
        "options": {"queue": "high"},
    },
    "unread-reconcile": {
        "task": "notify.reconcile_unread_counts",
        "schedule": NOTIFY_UNREAD_RECONCILE_INTERVAL,
        "options": {"queue": "high"},
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
}

NOTIFY_EMAIL_MESSAGE_ID_DOMAIN = env_str("NOTIFY_EMAIL_MESSAGE_ID_DOMAIN", "notify.localhost")
NOTIFY_PRIORITY_FIRST_ATTEMPT = env_int("NOTIFY_PRIORITY_FIRST_ATTEMPT", 5, minimum=0)
NOTIFY_PRIORITY_RETRY = env_int("NOTIFY_PRIORITY_RETRY", 3, minimum=0)
# A delivery that has a send message in flight is republished by the sweeper only when
# it is still unclaimed this long after that publish (the message was probably lost).
NOTIFY_RETRY_RESWEEP_AFTER = env_float("NOTIFY_RETRY_RESWEEP_AFTER", 600.0, minimum=1)
SPECTACULAR_SETTINGS.update(
    {
        # Served from the installed sidecar package: no CDN needed.
        "SWAGGER_UI_DIST": "SIDECAR",
        "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
        "REDOC_DIST": "SIDECAR",
    }
)
INSTALLED_APPS.append("drf_spectacular_sidecar")
SPECTACULAR_SETTINGS["SERVE_PERMISSIONS"] = ["rest_framework.permissions.AllowAny"]
SPECTACULAR_SETTINGS["SERVE_AUTHENTICATION"] = []
# Bodies past NOTIFY_MAX_BODY_BYTES get our own 413; this only bounds what Django buffers.
DATA_UPLOAD_MAX_MEMORY_SIZE = max(NOTIFY_MAX_BODY_BYTES * 4, 2_621_440)
# Channels with a working provider here; others are recorded as suppressed, not tried.
NOTIFY_CHANNELS_ENABLED = env_list("NOTIFY_CHANNELS_ENABLED", ["inapp", "email"])
