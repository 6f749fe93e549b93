"""Fixtures on the real services. Nothing is started silently and nothing is skipped:
a service that does not answer stops the run with a message naming it."""

from __future__ import annotations

import os
import uuid
from contextlib import contextmanager
from pathlib import Path

import pytest
from django.conf import settings
from kombu import Connection, Queue

from tests.processes import ARTIFACTS, ROOT, RelayProcess, WorkerProcess, stop_children
from tests.scheduling import SuiteScheduling, turn_report, turn_wait

# The local Web Push service and the live stream server, shared by several folders.
pytest_plugins = ["tests.peers.push_fixtures"]

WORK_QUEUES = ("high", "medium", "low", "dead_letter")


def pytest_configure(config: pytest.Config) -> None:
    """Empty the database after a transactional test by deleting the rows it left, not
    by Django's flush (tests/emptying.py says why)."""
    from django.test import TransactionTestCase

    from tests.emptying import database_empty

    def empty(self) -> None:
        for using in self._databases_names(include_mirrors=False):
            database_empty(using)

    TransactionTestCase._fixture_teardown = empty


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The tests that run on the 3-node cluster are `alone`: they time it, and its three
    nodes need the machine's cores. The cluster folder's other tests need neither."""
    for item in items:
        if "deployment" in item.fixturenames:  # the cluster's
            item.add_marker(pytest.mark.alone)


def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object | None:
    """`--dist loadgroup`: the suite's groups (tests/scheduling.py)."""
    if config.getvalue("dist") == "loadgroup":
        return SuiteScheduling(config, log)
    return None


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """An `alone` test waits for its turn beside the fairness test (tests/scheduling.py)."""
    turn_wait(item)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """The fairness test gives the other `alone` tests their turn (tests/scheduling.py)."""
    turn_report(report)


def pytest_sessionstart(session: pytest.Session) -> None:
    """Fail the whole run at once, loudly, when RabbitMQ or Redis is not answering."""
    import redis

    problems = []
    vhost = settings.CELERY_BROKER_URL.rpartition("/")[2]
    try:
        redis.Redis.from_url(settings.REDIS_URL, socket_connect_timeout=2).ping()
    except Exception as error:
        problems.append(f"Redis at {settings.REDIS_URL} is not answering: {error}")
    try:
        with Connection(settings.CELERY_BROKER_URL, connect_timeout=3) as conn:
            conn.ensure_connection(max_retries=1)
    except Exception as error:
        problems.append(
            f"RabbitMQ at {settings.CELERY_BROKER_URL} is not answering: {error}. "
            "Start it (scripts/services.sh, which also creates the test vhosts) or "
            f"create the vhost: rabbitmqctl add_vhost {vhost} && "
            f"rabbitmqctl set_permissions -p {vhost} guest '.*' '.*' '.*'"
        )
    if problems:
        pytest.exit("Required services are down:\n  " + "\n  ".join(problems), returncode=3)
    redis.Redis.from_url(settings.REDIS_URL).flushdb()


@pytest.fixture(autouse=True)
def _no_cached_webhook_subscriptions():
    """Each test starts with this process's webhook subscription cache empty: the database
    an earlier test subscribed in was rolled back, but the cache would still answer from
    it (and a test counting a round's statements would find a webhook write in it)."""
    from webhooks.events import subscription_cache_clear

    subscription_cache_clear()


@pytest.fixture(autouse=True)
def _no_learned_round_sizes():
    """Each test's send batches start at NOTIFY_BATCH_ROUND_START: this process's
    senders would otherwise start where an earlier test's last batch ended."""
    from deliveries.pipeline.attempt import round_sizes_forget

    round_sizes_forget()


# --- Broker ---------------------------------------------------------------------------


@pytest.fixture
def broker():
    """A live connection to the test vhost, with our topology declared."""
    from notify.broker import declare_topology

    with Connection(settings.CELERY_BROKER_URL) as conn:
        declare_topology(conn)
        yield conn


def messages_taken(queue: str) -> list[tuple[str, list, dict]]:
    """Every message waiting in `queue`, taken off it: (task name, args, kwargs)."""
    messages = []
    with Connection(settings.CELERY_BROKER_URL) as conn:
        waiting = Queue(queue, no_declare=True)(conn.default_channel)
        while (message := waiting.get(no_ack=True)) is not None:
            args, kwargs, _ = message.decode()
            messages.append((message.headers["task"], args, kwargs))
    return messages


def purge_queues(conn: Connection) -> None:
    channel = conn.default_channel
    for name in WORK_QUEUES:
        channel.queue_purge(name)


@pytest.fixture
def clean_breakers():
    """Provider breakers and buckets as a fresh deployment has them, before and after: a
    test that calls a provider in this process must not find one opened by another."""
    reset_provider_state()
    yield
    reset_provider_state()


def reset_provider_state() -> None:
    """Forget breaker states and token buckets left by earlier tests."""
    import redis

    client = redis.Redis.from_url(settings.REDIS_URL)
    for pattern in ("notify:breaker:*", "notify:bucket:provider:*"):
        keys = list(client.scan_iter(pattern))
        if keys:
            client.delete(*keys)


# --- Protocol peers -------------------------------------------------------------------


@pytest.fixture(scope="session")
def smtp_peer():
    from tests.peers.smtp import SmtpPeer

    peer = SmtpPeer()
    peer.start()
    yield peer
    peer.stop()


@pytest.fixture(scope="session")
def postmark_peer():
    """A local Postmark API (tests/peers/postmark.py), one per test process."""
    from tests.peers.postmark import PostmarkPeer

    peer = PostmarkPeer()
    peer.start()
    yield peer
    peer.stop()


@pytest.fixture
def smtp(smtp_peer):
    """The SMTP peer, reset; this process's kept SMTP session is closed before and after,
    so a test counts the sessions it opens itself, not one an earlier test left open."""
    from deliveries.channels.smtp import kept_session_close

    kept_session_close()
    smtp_peer.handler.reset()
    yield smtp_peer
    kept_session_close()
    smtp_peer.handler.reset()


# --- A real Celery worker ---------------------------------------------------------------


def worker_environment(db_name: str, smtp_port: int) -> dict[str, str]:
    """The environment a worker process needs to share this test run's places."""
    db = settings.DATABASES["default"]
    env = dict(os.environ)
    env.update(
        {
            "DJANGO_SETTINGS_MODULE": "tests.settings",
            "DATABASE_URL": f"postgres://{db['USER']}@{db['HOST']}:{db['PORT']}/{db_name}",
            "EMAIL_HOST": "127.0.0.1",
            "EMAIL_PORT": str(smtp_port),
            "PYTHONPATH": str(ROOT),
            # Celery runs Django's system checks as a worker starts (0.5 s of CPU): the
            # suite starts about sixty workers, and tests/config runs the checks itself.
            "CELERY_SKIP_CHECKS": "1",
        }
    )
    return env


@pytest.fixture(scope="session")
def worker_env(django_db_setup, smtp_peer) -> dict[str, str]:
    from django.db import connection

    return worker_environment(connection.settings_dict["NAME"], smtp_peer.port)


# The session worker once a test has started it (tests that must not have their queued
# messages taken pause it: see `session_worker_paused`).
_session_workers: list[WorkerProcess] = []


@pytest.fixture(scope="session")
def celery_worker(worker_env):
    worker = WorkerProcess(worker_env, name="test-all")
    worker.start()
    _session_workers.append(worker)
    yield worker
    _session_workers.remove(worker)
    worker.stop()


@pytest.fixture
def session_worker_paused():
    """For a test that publishes sends no worker may take: the session worker, if an
    earlier test started it, stops consuming for the test, and consumes again after."""
    from config.celery import app

    for worker in _session_workers:
        for queue in WORK_QUEUES[:3]:
            app.control.cancel_consumer(queue, destination=[worker.node], reply=True)
    yield
    for worker in _session_workers:
        worker.restore(WORK_QUEUES[:3])


_session_relays: list[RelayProcess] = []


@pytest.fixture(scope="session")
def outbox_relay(worker_env):
    relay = RelayProcess(worker_env)
    relay.start()
    _session_relays.append(relay)
    yield relay
    _session_relays.remove(relay)
    relay.stop()


def _session_relays_running() -> list[RelayProcess]:
    return [relay for relay in _session_relays if relay.process.poll() is None]


def session_relay_running() -> bool:
    """Whether the suite's relay process (started by an earlier test in this process)
    is publishing the outbox now."""
    return bool(_session_relays_running())


@contextmanager
def session_pipeline_stopped():
    """The suite's own relay stopped and its worker not consuming, for tests that run a
    deployment of their own on the same database (their outbox rows are theirs to
    publish); both come back afterwards."""
    from config.celery import app

    running = _session_relays_running()
    for relay in running:
        relay.stop()
    for worker in _session_workers:
        for queue in WORK_QUEUES[:3]:
            app.control.cancel_consumer(queue, destination=[worker.node], reply=True)
    try:
        yield
    finally:
        for worker in _session_workers:
            worker.restore(WORK_QUEUES[:3])
        for relay in running:
            relay.start()


@pytest.fixture
def workers_with(worker_env, celery_worker, pipeline):
    """Start workers with extra environment (e.g. a tighter rate limit) or another pool.

    The session worker stops consuming meanwhile, so only the new workers (with their
    settings) take messages; it consumes again afterwards.
    """
    from config.celery import app

    for queue in WORK_QUEUES[:3]:
        app.control.cancel_consumer(queue, destination=[celery_worker.node], reply=True)
    started: list[WorkerProcess] = []

    def start(
        *,
        count: int = 1,
        queues: str = "high,medium,low",
        pool: str = "prefork",
        concurrency: int = 2,
        **overrides: str,
    ) -> list[WorkerProcess]:
        env = {**worker_env, **overrides}
        workers = [
            WorkerProcess(
                env,
                name=f"custom-{uuid.uuid4().hex[:6]}",
                queues=queues,
                pool=pool,
                concurrency=concurrency,
            )
            for _ in range(count)
        ]
        for worker in workers:  # they start up side by side; each answers a ping first
            worker.spawn()
            started.append(worker)
        for worker in workers:
            worker.wait_ready()
        return started

    yield start
    stop_children([worker.process for worker in started])  # side by side, each SIGTERM
    celery_worker.restore(WORK_QUEUES[:3])


# The test settings' email retries (0.3 … 4.8 s) run out after ~9 s; these, as many and
# as growing, after ~1.5 s.
QUICK_EMAIL_RETRY_DELAYS = "0.05,0.1,0.2,0.4,0.8"


@pytest.fixture
def quick_email_retries(workers_with):
    """A worker whose email retries run out in ~1.5 s, for a test that needs emails to
    die after their five retries and does not look at the timing. It takes the session
    worker's place for the test (see workers_with); starting and stopping it costs ~6 s,
    so it pays off from two dying emails on."""
    return workers_with(NOTIFY_EMAIL_RETRY_DELAYS=QUICK_EMAIL_RETRY_DELAYS)


@pytest.fixture
def pipeline(transactional_db, celery_worker, outbox_relay, smtp, broker):
    """Everything a notification needs to travel: the outbox relay, a worker, the SMTP
    peer, clean queues, and provider breakers and buckets as a fresh deployment has them."""
    if outbox_relay.process.poll() is not None:  # a test killed it: a fresh one
        outbox_relay.start()
    purge_queues(broker)
    reset_provider_state()
    yield smtp
    # Let the worker go idle before the test database is flushed: a TRUNCATE racing a
    # task's transaction can deadlock (PostgreSQL then kills one of the two).
    purge_queues(broker)
    celery_worker.wait_idle()


@pytest.fixture(scope="module")
def receiver_peer():
    """The loopback status-webhook receiver (tests/peers/webhooks.py) on this test
    process's port, the one private origin webhooks may post to."""
    from tests.peers.webhooks import WebhookReceiver

    peer = WebhookReceiver(int(os.environ["NOTIFY_TEST_WEBHOOK_PORT"]))
    peer.start()
    yield peer
    peer.stop()


@pytest.fixture
def receiver(receiver_peer):
    """The webhook receiver, emptied before and after the test."""
    receiver_peer.reset()
    yield receiver_peer
    receiver_peer.reset()


# --- API clients and data ---------------------------------------------------------------


@pytest.fixture
def demo_data(db):
    from tests.demo_copy import demo_data_put

    demo_data_put()


@pytest.fixture
def producer_key(demo_data):
    """The suite's trusted key: every scope (a key made without named scopes may only
    send; tests/notify/producers/test_api_key_scopes.py shows that), owning the demo categories."""
    from notify.api_keys import api_key_issue
    from notify.models import Category, Scope

    issued = api_key_issue(producer_name="shop", scopes=list(Scope.values))
    Category.objects.update(owner=issued.api_key.producer)
    return issued


@pytest.fixture
def api(producer_key):
    from rest_framework.test import APIClient

    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {producer_key.key}")
    return client


# --- A real browser (Debian's Chromium driven by Playwright) -----------------------------

CHROMIUM = os.environ.get("NOTIFY_TEST_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@pytest.fixture
def browser_page(live_server, monkeypatch):
    """A headless Chromium page on the live server; screenshots go to artifacts/.

    `scripts/browser.sh` (run by `make test`) installs Chromium; a missing browser is a
    failure, not a skip.
    """
    from playwright.sync_api import sync_playwright

    if not os.path.exists(CHROMIUM):
        pytest.fail(f"Chromium is missing at {CHROMIUM}: run scripts/browser.sh")
    # Playwright's sync API keeps an event loop in this thread; the ORM calls our test
    # makes around it are still synchronous and safe.
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    ARTIFACTS.mkdir(exist_ok=True)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.base_url = live_server.url
        try:
            yield page
        finally:
            browser.close()


def screenshot(page, name: str) -> Path:
    """Save a full-page screenshot as a test artifact and return its path."""
    path = ARTIFACTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    return path


@pytest.fixture
def pat(demo_data):
    """A person with an email address, marketing consent and no quiet hours: every email
    category reaches them at once."""
    from datetime import time

    from notify.models import Recipient
    from preferences.models import ConsentSource, QuietHours
    from preferences.services import RequestOrigin, marketing_consent_grant

    person = Recipient.objects.create(user_id="pat", email="Pat@Example.com", locale="en")
    marketing_consent_grant(recipient=person, origin=RequestOrigin(source=ConsentSource.SIGNUP))
    QuietHours.objects.create(recipient=person, start=time(0, 0), end=time(0, 0))
    return person
