"""Is each dependency reachable right now? Short timeouts: a probe must not hang."""

from __future__ import annotations

import logging

from django.conf import settings
from django.db import connections
from django_redis import get_redis_connection
from kombu import Connection

logger = logging.getLogger(__name__)


def check_database() -> None:
    """A round trip to PostgreSQL; raises when it is not answering."""
    with connections["default"].cursor() as cursor:
        cursor.execute("SELECT 1")


def broker_connection() -> Connection:
    """A connection to the first node of CELERY_BROKER_URL that answers, each node of
    the list tried once, none for longer than NOTIFY_OPS_CHECK_TIMEOUT; raises when no
    node answers. The caller closes it (`with broker_connection() as conn:`)."""
    timeout = settings.NOTIFY_OPS_CHECK_TIMEOUT
    nodes = len(settings.CELERY_BROKER_URL.split(";"))
    conn = Connection(settings.CELERY_BROKER_URL, connect_timeout=timeout)
    try:
        # kombu moves to the next node of the list after each failed try.
        conn.ensure_connection(
            max_retries=nodes - 1, interval_start=0, interval_step=0, timeout=timeout * nodes
        )
    except BaseException:
        conn.release()
        raise
    return conn


def check_broker() -> None:
    """A real AMQP handshake with a node of CELERY_BROKER_URL (not just a TCP connect)."""
    with broker_connection():
        pass


def check_redis() -> None:
    """PING on the Redis the app itself uses (the `default` cache)."""
    client = get_redis_connection("default")
    client.ping()


CHECKS = {"database": check_database, "broker": check_broker, "redis": check_redis}


def dependencies_down() -> list[str]:
    """The names of the dependencies that do not answer, in CHECKS order; [] when all do.

    Why each failed goes to the log only: error text carries host names, ports, user
    names and driver internals, and /readyz answers anyone who can reach it.
    """
    down: list[str] = []
    for name, check in CHECKS.items():
        try:
            check()
        except Exception as error:  # any failure means "not ready", whatever its type
            logger.warning("readiness: %s is down: %s: %s", name, type(error).__name__, error)
            down.append(name)
    return down
