"""Reading settings from the environment, failing loudly on bad values.

Every helper names the variable in its error, so a typo in a deployment stops the
process at start with a message an operator can act on.
"""

from __future__ import annotations

import os
from urllib.parse import unquote, urlsplit

from django.core.exceptions import ImproperlyConfigured

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


def env_str(name: str, default: str) -> str:
    """The variable's text, or the default when it is not set."""
    return os.environ.get(name, default)


def env_int(name: str, default: int, *, minimum: int | None = None) -> int:
    """An integer variable; a non-number or one below `minimum` stops the start."""
    raw = os.environ.get(name)
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name} must be an integer, got {raw!r}") from None
    if minimum is not None and value < minimum:
        raise ImproperlyConfigured(f"{name} must be at least {minimum}, got {value}")
    return value


def env_int_or_none(name: str, *, minimum: int | None = None) -> int | None:
    """An optional integer variable: None when unset or empty, else as `env_int`."""
    if not os.environ.get(name, "").strip():
        return None
    return env_int(name, 0, minimum=minimum)


def env_float(name: str, default: float, *, minimum: float | None = None) -> float:
    """A number variable; a non-number or one below `minimum` stops the start."""
    raw = os.environ.get(name)
    if raw is None:
        return default
    try:
        value = float(raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name} must be a number, got {raw!r}") from None
    if minimum is not None and value < minimum:
        raise ImproperlyConfigured(f"{name} must be at least {minimum}, got {value}")
    return value


def env_bool(name: str, default: bool) -> bool:
    """A yes/no variable (1/0, true/false, yes/no, on/off)."""
    raw = os.environ.get(name)
    if raw is None:
        return default
    lowered = raw.strip().lower()
    if lowered in _TRUE:
        return True
    if lowered in _FALSE:
        return False
    raise ImproperlyConfigured(f"{name} must be a boolean (true/false), got {raw!r}")


def env_list(name: str, default: list[str]) -> list[str]:
    """A comma-separated list; blanks are dropped."""
    raw = os.environ.get(name)
    if raw is None:
        return list(default)
    return [item.strip() for item in raw.split(",") if item.strip()]


def env_origins(name: str) -> list[str]:
    """A comma-separated list of web origins (`scheme://host[:port]`, no path), or `*`."""
    origins = env_list(name, [])
    for origin in origins:
        if origin == "*":
            continue
        parts = urlsplit(origin)
        if (
            parts.scheme not in ("http", "https")
            or not parts.hostname
            or parts.path
            or parts.query
            or parts.fragment
        ):
            raise ImproperlyConfigured(
                f"{name} must list origins such as https://app.example.com (no path) or *, "
                f"got {origin!r}"
            )
    return origins


def env_float_list(name: str, default: list[float]) -> list[float]:
    """A comma-separated list of non-negative numbers, e.g. retry delays in seconds."""
    raw = os.environ.get(name)
    if raw is None:
        return list(default)
    try:
        values = [float(item) for item in raw.split(",") if item.strip()]
    except ValueError:
        raise ImproperlyConfigured(f"{name} must be comma-separated numbers, got {raw!r}") from None
    if not values or any(value < 0 for value in values):
        raise ImproperlyConfigured(f"{name} must list at least one non-negative number")
    return values


def env_url(name: str, default: str, *, schemes: tuple[str, ...]) -> str:
    """A URL variable whose scheme must be one of `schemes`."""
    raw = os.environ.get(name, default)
    parts = urlsplit(raw)
    if parts.scheme not in schemes or not parts.hostname:
        raise ImproperlyConfigured(
            f"{name} must be a URL starting with one of {', '.join(s + '://' for s in schemes)}"
            f" and naming a host, got {raw!r}"
        )
    try:
        parts.port  # noqa: B018 - a bad port raises here
    except ValueError:
        raise ImproperlyConfigured(f"{name} has an invalid port: {raw!r}") from None
    return raw


def database_from_url(name: str, default: str) -> dict[str, object]:
    """Django DATABASES['default'] from a postgres:// URL in variable `name`."""
    url = env_url(name, default, schemes=("postgres", "postgresql"))
    parts = urlsplit(url)
    db_name = unquote(parts.path.lstrip("/"))
    if not db_name:
        raise ImproperlyConfigured(f"{name} must name a database, got {url!r}")
    return {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": db_name,
        "USER": unquote(parts.username or ""),
        "PASSWORD": unquote(parts.password or ""),
        "HOST": parts.hostname or "",
        "PORT": str(parts.port or 5432),
    }


def secret_text(name: str) -> str:
    """A secret given either inline or as a path to a file holding it; '' when unset."""
    raw = os.environ.get(name, "")
    if raw and os.path.isfile(raw):
        with open(raw, encoding="utf-8") as handle:
            return handle.read()
    return raw
