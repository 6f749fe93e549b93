"""Start-up refusals: settings a deployment must not run with.

The web entry points (config/asgi.py, config/wsgi.py) call `secret_key_refuse_weak`, so
the web process does not start with DEBUG off on the built-in or a short SECRET_KEY
(scripts/web.sh loads config.asgi once before uvicorn, whose process manager would
otherwise restart the refusing children forever, and exits with the reason); the
other long-running processes (Celery workers and beat, the outbox relay, the dead-letter
consumer: they make and check the gate's seals too) call `process_exit_on_weak_secret_key`
as they start. `manage.py check --deploy` reports the same. It is not an ordinary system check: that
would stop `makemigrations` and other local commands, which run with DEBUG off too.
"""

from __future__ import annotations

from django.conf import settings
from django.core import checks
from django.core.exceptions import ImproperlyConfigured

# Django's own rule (security.W009): at least 50 characters.
SECRET_KEY_MIN_LENGTH = 50


def secret_key_problem(*, secret_key: str, debug: bool, built_in: str) -> str | None:
    """Why this SECRET_KEY must not be used (None when it may, or in DEBUG)."""
    if debug:
        return None
    if secret_key == built_in:
        return "SECRET_KEY is the built-in development key; set DJANGO_SECRET_KEY."
    if len(secret_key) < SECRET_KEY_MIN_LENGTH:
        return (
            f"SECRET_KEY is shorter than {SECRET_KEY_MIN_LENGTH} characters; set "
            "DJANGO_SECRET_KEY to a long random value."
        )
    return None


def _current_problem() -> str | None:
    return secret_key_problem(
        secret_key=settings.SECRET_KEY,
        debug=settings.DEBUG,
        built_in=getattr(settings, "SECRET_KEY_DEFAULT", ""),
    )


def secret_key_refuse_weak() -> None:
    """Raise ImproperlyConfigured when DEBUG is off and SECRET_KEY is weak."""
    problem = _current_problem()
    if problem is not None:
        raise ImproperlyConfigured(f"{problem} (DEBUG is off; refusing to start)")


def process_exit_on_weak_secret_key(*, process: str) -> None:
    """Stop this process (SystemExit, with the reason) when DEBUG is off and SECRET_KEY is
    weak. SystemExit, not an exception: Celery logs and swallows exceptions raised in its
    start-up signals, and the process would run on regardless."""
    problem = _current_problem()
    if problem is not None:
        raise SystemExit(f"{process}: {problem} (DEBUG is off; refusing to start)")


@checks.register(checks.Tags.security, deploy=True)
def check_secret_key(app_configs=None, **kwargs) -> list[checks.CheckMessage]:
    """`check --deploy`: the same rule as the web process applies at start."""
    problem = _current_problem()
    return [] if problem is None else [checks.Error(problem, id="notify.E001")]


@checks.register(checks.Tags.security, deploy=True)
def check_erasure_key(app_configs=None, **kwargs) -> list[checks.CheckMessage]:
    """`check --deploy`: erasure hashes must not be made with the built-in key (anyone who
    knows it could test a guessed user id or email against the kept consent records)."""
    if settings.DEBUG or settings.NOTIFY_ERASURE_KEY != settings.NOTIFY_ERASURE_KEY_DEFAULT:
        return []
    return [
        checks.Error(
            "NOTIFY_ERASURE_KEY is the built-in development key; set it to a long random "
            "value once, and never change it.",
            id="notify.E002",
        )
    ]


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
