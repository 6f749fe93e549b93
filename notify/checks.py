"""Start-up refusals: settings a deployment must not run with.

With DEBUG off, no process may run on a key someone else knows: SECRET_KEY (and each of
SECRET_KEY_FALLBACKS, which still verify what they signed) must not be a known default
(`KNOWN_DEFAULT_KEYS`: the built-in one and every key this repository ever showed, in
settings, compose files or the Dockerfile), nor a Django `django-insecure-` key, nor
shorter than 50 characters; NOTIFY_ERASURE_KEY must not be a known default either.

The web entry points (config/asgi.py, config/wsgi.py) call `secret_key_refuse_weak`, so
the web process does not start on such a key (scripts/web.sh loads config.asgi once
before uvicorn, whose process manager would otherwise restart the refusing children
forever, and exits with the reason); the other long-running processes (Celery workers
and beat, the outbox relay, the dead-letter consumer: they make and check the gate's
seals, and hash erased ids, too) call `process_exit_on_weak_secret_key` as they start.
`manage.py check --deploy` reports the same. It is not an ordinary system check: that
would stop `makemigrations` and other local commands, which run with DEBUG off too.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from django.conf import settings
from django.core import checks
from django.core.exceptions import ImproperlyConfigured

# Django's own rule (security.W009): at least 50 characters.
SECRET_KEY_MIN_LENGTH = 50
# Keys anyone with this repository knows: never a deployment's, whatever their length.
# The tests' own key (tests/settings.py) is not here: the suite runs with DEBUG off on it.
KNOWN_DEFAULT_KEYS = frozenset(
    {
        "dev-only-insecure-key-change-me-in-any-deployment",  # SECRET_KEY's built-in
        "dev-only-erasure-key-change-me-in-any-deployment",  # NOTIFY_ERASURE_KEY's built-in
        # What docker-compose.yml and docker-compose.cluster.yml used to default to.
        "compose-dev-only-insecure-key-change-me-before-any-real-use-0123456789",
        "build-only-dummy",  # the Dockerfile's, for collectstatic at build time
    }
)
# The prefix of the keys Django's startproject writes into settings.
DJANGO_INSECURE_PREFIX = "django-insecure-"
# How to make a key, said in every refusal.
_HOW = "a long random value, e.g. python3 -c 'import secrets; print(secrets.token_urlsafe(50))'"


def _key_known(key: str, known: Collection[str]) -> bool:
    return key in known or key.startswith(DJANGO_INSECURE_PREFIX)


def _weakness(key: str, known: Collection[str]) -> str | None:
    """What makes a signing key weak, as the end of a sentence; None when nothing does."""
    if _key_known(key, known):
        return (
            "is a known development key (the built-in one, one from this repository, or "
            f"Django's {DJANGO_INSECURE_PREFIX} kind)"
        )
    if len(key) < SECRET_KEY_MIN_LENGTH:
        return f"is shorter than {SECRET_KEY_MIN_LENGTH} characters"
    return None


def secret_key_problem(
    *, secret_key: str, debug: bool, known: Collection[str] = KNOWN_DEFAULT_KEYS
) -> str | None:
    """Why this SECRET_KEY must not be used (None when it may, or in DEBUG): a known
    default, Django's insecure kind, or too short."""
    weakness = None if debug else _weakness(secret_key, known)
    if weakness is None:
        return None
    return f"SECRET_KEY {weakness}; set DJANGO_SECRET_KEY to {_HOW}."


def signing_keys_problem(
    *, secret_key: str, fallbacks: Sequence[str], debug: bool, known: Collection[str]
) -> str | None:
    """Why SECRET_KEY or one of its fallbacks (which still verify what they signed) must
    not be used; None when none of them is weak, or in DEBUG."""
    problem = secret_key_problem(secret_key=secret_key, debug=debug, known=known)
    if problem is not None or debug:
        return problem
    for number, fallback in enumerate(fallbacks, start=1):
        weakness = _weakness(fallback, known)
        if weakness is not None:
            return (
                f"DJANGO_SECRET_KEY_FALLBACKS entry {number} {weakness}: it would still "
                "verify what anyone signs with it; remove it from DJANGO_SECRET_KEY_FALLBACKS."
            )
    return None


def erasure_key_problem(*, erasure_key: str, debug: bool, known: Collection[str]) -> str | None:
    """Why this NOTIFY_ERASURE_KEY must not be used (None when it may, or in DEBUG): with
    a known key, anyone could test a guessed user id or email against kept records."""
    if debug or not _key_known(erasure_key, known):
        return None
    return (
        "NOTIFY_ERASURE_KEY is a known development key; set NOTIFY_ERASURE_KEY to "
        f"{_HOW} once, and never change it."
    )


def _known_keys() -> frozenset[str]:
    built_in = (
        getattr(settings, "SECRET_KEY_DEFAULT", ""),
        getattr(settings, "NOTIFY_ERASURE_KEY_DEFAULT", ""),
    )
    return KNOWN_DEFAULT_KEYS | {key for key in built_in if key}


def _signing_problem() -> str | None:
    return signing_keys_problem(
        secret_key=settings.SECRET_KEY,
        fallbacks=settings.SECRET_KEY_FALLBACKS,
        debug=settings.DEBUG,
        known=_known_keys(),
    )


def _erasure_problem() -> str | None:
    return erasure_key_problem(
        erasure_key=settings.NOTIFY_ERASURE_KEY, debug=settings.DEBUG, known=_known_keys()
    )


def _current_problem() -> str | None:
    return _signing_problem() or _erasure_problem()


def secret_key_refuse_weak() -> None:
    """Raise ImproperlyConfigured when DEBUG is off and SECRET_KEY, a fallback or the
    erasure key is weak (see the module docstring)."""
    problem = _current_problem()
    if problem is not None:
        raise ImproperlyConfigured(f"{problem} (DEBUG is off; refusing to start)")


def process_exit_on_weak_secret_key(*, process: str) -> None:
    """Stop this process (SystemExit, with the reason) when DEBUG is off and SECRET_KEY, a
    fallback or the erasure key is weak. SystemExit, not an exception: Celery logs and
    swallows exceptions raised in its start-up signals, and the process would run on
    regardless."""
    problem = _current_problem()
    if problem is not None:
        raise SystemExit(f"{process}: {problem} (DEBUG is off; refusing to start)")


@checks.register(checks.Tags.security, deploy=True)
def check_secret_key(app_configs=None, **kwargs) -> list[checks.CheckMessage]:
    """`check --deploy`: the same rule as the processes apply at start, for SECRET_KEY and
    its fallbacks."""
    problem = _signing_problem()
    return [] if problem is None else [checks.Error(problem, id="notify.E001")]


@checks.register(checks.Tags.security, deploy=True)
def check_erasure_key(app_configs=None, **kwargs) -> list[checks.CheckMessage]:
    """`check --deploy`: erasure hashes must not be made with a known key."""
    problem = _erasure_problem()
    return [] if problem is None else [checks.Error(problem, id="notify.E002")]


@checks.register(checks.Tags.security, deploy=True)
def check_inbox_demo(app_configs=None, **kwargs) -> list[checks.CheckMessage]:
    """`check --deploy`: the inbox demo page hands its person's user token to anyone."""
    if settings.DEBUG or not settings.NOTIFY_INBOX_DEMO:
        return []
    return [
        checks.Error(
            "NOTIFY_INBOX_DEMO is on: /inbox/demo/token mints a user token for "
            f"{settings.NOTIFY_INBOX_DEMO_USER!r} for anyone who asks. Turn it off.",
            id="notify.E003",
        )
    ]
