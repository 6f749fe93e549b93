"""Django's core: the apps, middleware, URLs, templates, locale, static files and
logging, and where the project lives and is reached."""

from pathlib import Path

from notify.env import (
    env_bool,
    env_list,
    env_str,
    env_url,
)

BASE_DIR = Path(__file__).resolve().parent.parent.parent

DEBUG = env_bool("DJANGO_DEBUG", False)
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
    "drf_spectacular_sidecar",
    "notify",
    "preferences",
    "templates_admin",
    "deliveries",
    "webhooks",
    "history",
    "campaigns",
    "analytics",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "notify.api.cors.EndUserCorsMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]
# What views marked `lean_stack = True` run through instead (config/handlers.py): the
# middleware above whose work a token-authenticated API read needs (security headers,
# CORS, the Host check and Content-Length of CommonMiddleware, X-Frame-Options), in the
# same order. The others serve browser sessions, CSRF, messages and Django's user, and
# do nothing for such a view.
NOTIFY_LEAN_MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "notify.api.cors.EndUserCorsMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "config.urls"
ASGI_APPLICATION = "config.asgi.application"
WSGI_APPLICATION = "config.wsgi.application"

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


AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]

LANGUAGE_CODE = "en-us"
# The languages a person's pages, email footers and inbox come in (their `locale`, else
# LANGUAGE_CODE: preferences/languages.py); adding one is docs/languages.md. Every string
# a person sees lives in the preferences app, so its own locale/ directory holds the
# catalogs (Django finds an installed app's) and LOCALE_PATHS stays unset. There is no
# LocaleMiddleware: a person's pages follow their own setting, never Accept-Language.
LANGUAGES = [("en", "English"), ("ru", "Русский")]
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = BASE_DIR / "staticfiles"

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
