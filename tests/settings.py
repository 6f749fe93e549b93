"""Settings for the test suite: the project's settings, pointed at isolated test places.

Defaults only: anything already in the environment wins. RabbitMQ uses its own vhost
and Redis its own database, so a running dev stack neither eats test messages nor
sees test data. Retry delays are shortened; their shape (growing, jittered) is kept.
"""

import os

from scripts.ports import unused_port

# The local Web Push peer (tests/deliveries/push/peer.py) listens on this port, chosen once per run
# and inherited by the worker processes, so its origin can be listed as allowed below.
os.environ.setdefault("NOTIFY_TEST_PUSH_PORT", str(unused_port()))
# The loopback webhook receiver (tests/peers/webhooks.py) likewise: its origin is the one
# private address status webhooks may be posted to.
os.environ.setdefault("NOTIFY_TEST_WEBHOOK_PORT", str(unused_port()))

_TEST_DEFAULTS = {
    "CELERY_BROKER_URL": "amqp://guest:guest@127.0.0.1:5672/notify_test",
    "REDIS_URL": "redis://127.0.0.1:6379/15",
    "NOTIFY_EMAIL_RETRY_DELAYS": "0.3,0.6,1.2,2.4,4.8",
    "NOTIFY_SMS_RETRY_DELAYS": "0.3,0.6,1.2",
    "NOTIFY_ROUTE_RETRY_BASE": "0.1",
    "NOTIFY_ROUTE_RETRY_MAX": "0.4",
    "NOTIFY_RETRY_SWEEP_GRACE": "1",
    # Each test builds its own keys and categories; in-process caching of them is shown by
    # its own test (with the production setting), not shared across tests.
    "NOTIFY_AUTH_CACHE_SECONDS": "0",
    "NOTIFY_OUTBOX_POLL_INTERVAL": "0.5",
    # The suite's workers serve every queue in one process, so campaign tasks yielding to
    # login codes would only slow the campaign tests down;
    # tests/flow/test_priority.py shows the yielding itself, with the production
    # window.
    "NOTIFY_CAMPAIGN_YIELD_WINDOW": "0",
    # Likewise the host's campaign statement slots: the suite runs several workers side by
    # side, whose campaign tests would wait on each other's statements;
    # tests/campaigns/test_campaign_statements.py shows the slots with real processes.
    "NOTIFY_CAMPAIGN_DB_CONCURRENCY": "0",
    "NOTIFY_PUBLIC_URL": "http://testserver",
    # DEBUG is off here as in production, so the web process (uvicorn under the push
    # tests) needs a key it accepts; a test-only one.
    "DJANGO_SECRET_KEY": "tests-only-secret-key-0123456789-abcdefghijklmnopqrstuvwxyz",
    # Likewise the erasure key: the processes refuse the built-in one with DEBUG off.
    "NOTIFY_ERASURE_KEY": "tests-only-erasure-key-0123456789-abcdefghijklmnopqrstuvwxyz",
    "LOG_LEVEL": "WARNING",
    # Push: a test-only VAPID key, and the push backoff shortened (same shape).
    "WEBPUSH_VAPID_PRIVATE_KEY": os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "deliveries", "push", "vapid_test_private.pem"
    ),
    "WEBPUSH_VAPID_SUBJECT": "mailto:tests@notify.example.com",
    "NOTIFY_PUSH_RETRY_BASE": "0.3",
    "NOTIFY_PUSH_RETRY_MAX": "2.4",
    # Analytics writes no events unless a test turns it on (tests/analytics/ do, with
    # their own `analytics` process): the pipeline's statement counts elsewhere are those
    # of a deployment without it, and tests/analytics/test_costs.py shows the one
    # statement per round it adds. Reads open the store in the test's own process.
    "NOTIFY_ANALYTICS_ENABLED": "false",
    "NOTIFY_ANALYTICS_READER_ADDRESS": "",
    # The loopback receiver, and a documentation host that tests register and never post to.
    "NOTIFY_WEBHOOK_ALLOWED_PRIVATE_ORIGINS": (
        f"http://127.0.0.1:{os.environ['NOTIFY_TEST_WEBHOOK_PORT']},https://hooks.example"
    ),
    # The local push peer, listed exactly (it is loopback), and the documentation host
    # that tests register without ever sending to it.
    "WEBPUSH_ALLOWED_ORIGINS": (
        f"http://127.0.0.1:{os.environ['NOTIFY_TEST_PUSH_PORT']},https://push.example"
    ),
}
for _name, _value in _TEST_DEFAULTS.items():
    os.environ.setdefault(_name, _value)


def _own_places_for_xdist_worker() -> None:
    """Under pytest-xdist each test process (gw0, gw1, …) gets its own vhost, Redis
    database and push peer port; PostgreSQL needs nothing here, pytest-django gives each
    its own test database. The places are chosen once per test process: the worker
    processes a test starts inherit them (and the marker that says so) unchanged."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    if not worker or os.environ.get("NOTIFY_TEST_PLACES_FOR") == worker:
        return
    number = int(worker.removeprefix("gw"))
    broker, _, vhost = os.environ["CELERY_BROKER_URL"].rpartition("/")
    os.environ["CELERY_BROKER_URL"] = f"{broker}/{vhost}_{worker}"
    redis_url, _, redis_db = os.environ["REDIS_URL"].rpartition("/")
    # 15 → 13, 12, …: the database just below the suite's is the bench's (BENCH_REDIS_DB).
    os.environ["REDIS_URL"] = f"{redis_url}/{int(redis_db) - 2 - number}"
    # Each local peer listening on a port chosen once per run gets its own per process,
    # and the allow-list that names it follows.
    for port_name, allowed_name in (
        ("NOTIFY_TEST_PUSH_PORT", "WEBPUSH_ALLOWED_ORIGINS"),
        ("NOTIFY_TEST_WEBHOOK_PORT", "NOTIFY_WEBHOOK_ALLOWED_PRIVATE_ORIGINS"),
    ):
        port = str(unused_port())
        os.environ[allowed_name] = os.environ[allowed_name].replace(
            f"127.0.0.1:{os.environ[port_name]}", f"127.0.0.1:{port}"
        )
        os.environ[port_name] = port
    os.environ["NOTIFY_TEST_PLACES_FOR"] = worker


_own_places_for_xdist_worker()

from config.settings import *  # noqa: E402,F403

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]

# chDB opens one data directory per process, and each test process has its own store.
if "NOTIFY_ANALYTICS_DATA_DIR" not in os.environ:
    NOTIFY_ANALYTICS_DATA_DIR = os.path.join(
        os.environ.get("TMPDIR", "/tmp"), f"notify-tests-analytics-{os.getpid()}"
    )

# Static files straight from the apps (as with DEBUG), so the web process the browser tests
# start serves the inbox component without a collectstatic step.
WHITENOISE_USE_FINDERS = True

# Amazon SNS signing certificates may come from a loopback peer (tests/peers/amazon_ses.py
# serves its own): only here, never in a deployment's settings.
NOTIFY_SNS_TEST_CERTS_ON_LOOPBACK = True
