"""Keys that sign and hash, HTTPS and the proxy in front."""

from notify.env import (
    env_bool,
    env_int,
    env_list,
    env_str,
)

# Signs user tokens, unsubscribe links and the gate's seals. With DEBUG off every
# long-running process refuses to start on this built-in key, any other known one (from
# this repository, or Django's `django-insecure-` kind) or one shorter than 50 characters,
# as SECRET_KEY or among the fallbacks (notify/checks.py). To rotate: the new key here,
# the old one in the fallbacks until what it signed has expired (comma-separated).
SECRET_KEY_DEFAULT = "dev-only-insecure-key-change-me-in-any-deployment"
SECRET_KEY = env_str("DJANGO_SECRET_KEY", SECRET_KEY_DEFAULT)
SECRET_KEY_FALLBACKS = env_list("DJANGO_SECRET_KEY_FALLBACKS", [])
# Erasure keeps consent records and suppression entries under an HMAC of the user id (and
# of the email and phone) made with this key. It is not SECRET_KEY and is never rotated:
# a new key would make every erased person's consent history unfindable and their
# suppression ineffective. With DEBUG off the processes refuse to start on the built-in
# value, as `check --deploy` does (docs/erasure.md).
NOTIFY_ERASURE_KEY_DEFAULT = "dev-only-erasure-key-change-me-in-any-deployment"
NOTIFY_ERASURE_KEY = env_str("NOTIFY_ERASURE_KEY", NOTIFY_ERASURE_KEY_DEFAULT)

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
