"""The bounded HTTP session every outbound post goes through (push providers, ESPs,
status webhooks): a total deadline per request, a bounded read of the answer, no
redirects and no proxy taken from the environment."""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import requests
from django.conf import settings
from requests.adapters import DEFAULT_POOLSIZE

from egress.deadline import BoundedAdapter


def bounded_mount(session: requests.Session, **adapter: Any) -> None:
    """Send every request of `session` through one `BoundedAdapter` (a total deadline
    per request, a bounded read of the answer, a lost kept connection sent once more),
    in place of whatever adapters it had, wherever they were mounted."""
    adapter.setdefault("kept_idle_max", settings.NOTIFY_PUSH_KEPT_IDLE_MAX)
    transport = BoundedAdapter(**adapter)
    for prefix in {"http://", "https://", *session.adapters}:
        session.mount(prefix, transport)


class BoundedSession(requests.Session):
    """A session that follows no redirect and takes no proxy from the environment, on a
    `BoundedAdapter`: an answer is read there, at most `max_bytes` of it, before the
    deadline (pywebpush reads `response.text`, which is then that bounded body)."""

    def __init__(
        self,
        *,
        total_seconds: float,
        max_bytes: int,
        kept_idle_max: float,
        pool_size: int = DEFAULT_POOLSIZE,
    ) -> None:
        super().__init__()
        self.trust_env = False  # no proxy from the environment: we post only where allowed
        bounded_mount(
            self, total_seconds=total_seconds, max_bytes=max_bytes, kept_idle_max=kept_idle_max,
            pool_maxsize=pool_size,
        )  # fmt: skip

    def request(self, method, url, *args, **kwargs) -> requests.Response:
        kwargs["allow_redirects"] = False
        return super().request(method, url, *args, **kwargs)


def bounded_session(
    total_seconds: float, max_bytes: int, *, pool_size: int = DEFAULT_POOLSIZE
) -> BoundedSession:
    """The process's shared session for this deadline and answer size, keeping up to
    `pool_size` connections per host (posts in flight beyond it open one each)."""
    return _bounded_session(total_seconds, max_bytes, settings.NOTIFY_PUSH_KEPT_IDLE_MAX, pool_size)


@lru_cache(maxsize=4)
def _bounded_session(
    total_seconds: float, max_bytes: int, kept_idle_max: float, pool_size: int
) -> BoundedSession:
    return BoundedSession(
        total_seconds=total_seconds,
        max_bytes=max_bytes,
        kept_idle_max=kept_idle_max,
        pool_size=pool_size,
    )
