"""A 3-node RabbitMQ cluster on loopback and the shipped processes on two "hosts".

Started once for the tests of this folder and reused by them, torn down after the last:
the cluster (scripts/rabbit_cluster.py), an SMTP peer of its own, a web process, and two
process groups that stand for two hosts — each a worker for `high` and `medium`
(scripts/worker.sh, named medium@host-a / medium@host-b), an outbox relay
(scripts/relay.sh high,medium) and a beat (scripts/beat.sh) — all on quorum queues and
all given the whole list of nodes, each host in its own order. Host B's list starts
with a node that does not exist, as a deployment with a node down from the start has.
"""

from __future__ import annotations

import json
import time

import httpx
import pytest
import redis
from django.conf import settings

from scripts.ports import unused_port
from scripts.rabbit_cluster import RabbitCluster
from tests.cluster.deployment import Deployment, Host, StallingHandler
from tests.conftest import session_pipeline_stopped
from tests.peers.smtp import SmtpPeer
from tests.processes import ARTIFACTS, ScriptProcess, WebProcess

pytestmark = pytest.mark.e2e

# Seconds a claim may stand before the sweeper takes it for a dead worker's: short, so
# the beat test's stranded delivery is recoverable soon, and still far longer than any
# send here takes.
CLAIM_TIMEOUT = "8"
# The beats' keys in Redis, removed when the tests are done.
BEAT_KEY_PREFIX = "notify:test-cluster-beat:"


@pytest.fixture(scope="package")
def cluster_smtp():
    peer = SmtpPeer()
    peer.handler = StallingHandler()
    peer.controller.handler = peer.handler
    peer.start()
    yield peer
    peer.handler.release.set()
    peer.stop()


def _host_env(name: str, base_env: dict[str, str], broker_urls: str) -> dict[str, str]:
    return {
        **base_env,
        "CELERY_BROKER_URL": broker_urls,
        "WORKER_HOSTNAME": name,
        "NOTIFY_CAMPAIGN_YIELD_SCOPE": name,
    }


def _host(name: str, base_env: dict[str, str], broker_urls: str) -> Host:
    env = _host_env(name, base_env, broker_urls)
    host = Host(name, env)
    host.start_worker()
    host.relay = ScriptProcess("relay.sh", "high,medium", env=env, name=f"cluster-{name}-relay")
    host.beat = ScriptProcess("beat.sh", env=env, name=f"cluster-{name}-beat")
    host.relay.start()
    host.beat.start()
    return host


@pytest.fixture(scope="package")
def deployment(cluster_smtp, worker_env):
    """The cluster, web, and two hosts of workers, relays and beats on it (the suite's
    own relay and worker stand aside meanwhile: they would take the cluster's outbox
    rows). How long the cluster took is written to artifacts/cluster-timings.json."""
    cluster = RabbitCluster()
    try:
        with session_pipeline_stopped():
            yield from _deployment(cluster, cluster_smtp, worker_env)
    finally:
        cluster.stop()


def _deployment(cluster: RabbitCluster, cluster_smtp, worker_env):
    started = time.monotonic()
    base_env = {
        **worker_env,
        "EMAIL_PORT": str(cluster_smtp.port),
        "NOTIFY_QUEUE_TYPE": "quorum",
        "LOG_LEVEL": "INFO",
        "WORKER_CONCURRENCY": "3",
        "DATABASE_POOL_MAX_SIZE": "4",
        "NOTIFY_SEND_CLAIM_TIMEOUT": CLAIM_TIMEOUT,
        # A beat takes over within lock + loop interval of the leader's death: 22 s by
        # default (test_the_default_beat_takeover_fits_in_30_seconds); shortened here so
        # the suite waits less, with the same rule (lock > confirm timeout + interval).
        "NOTIFY_BEAT_LOCK_TIMEOUT": "8",
        "NOTIFY_BEAT_MAX_LOOP_INTERVAL": "1",
        "NOTIFY_BROKER_CONFIRM_TIMEOUT": "5",
        "NOTIFY_BEAT_KEY_PREFIX": BEAT_KEY_PREFIX,
        # With every node down, a worker tries the list again after at most this: the
        # outage test waits less for the nodes it brought back (5 s by default).
        "NOTIFY_BROKER_RECONNECT_MAX": "1",
    }
    nowhere = f"amqp://guest:guest@127.0.0.1:{unused_port()}/notify"  # no node listens there
    web_env = _host_env("host-a", base_env, cluster.urls([1, 2, 3]))
    web = WebProcess({**web_env, "DATABASE_POOL_MAX_SIZE": "4"}, name="cluster-web")
    hosts: list[Host] = []
    try:
        # Web needs no broker to start: it starts while the nodes boot. The others
        # declare the queues as they start, so they wait for all three nodes (a quorum
        # queue declared on a lone node would have one replica).
        cluster.boot()
        web.start(timeout=90)  # beside three booting nodes on a busy box
        cluster.form()
        ARTIFACTS.mkdir(exist_ok=True)
        (ARTIFACTS / "cluster-timings.json").write_text(json.dumps(cluster.timings, indent=2))
        print(
            f"\nRabbitMQ cluster: booted in {cluster.timings['boot']:.1f}s, "
            f"clustered in {cluster.timings['start']:.1f}s"
        )
        hosts.append(_host("host-a", base_env, cluster.urls([1, 2, 3])))
        hosts.append(_host("host-b", base_env, f"{nowhere};{cluster.urls([2, 3, 1])}"))
        for host in hosts:
            host.worker.wait_logged(" ready.", timeout=60)
        print(f"\nCluster and processes ready in {time.monotonic() - started:.1f}s")
        yield Deployment(cluster, cluster_smtp, web, hosts)
    finally:
        # Killed, not stopped: their clean shutdown is not what these tests look at, and
        # waiting for it would cost seconds; the cluster goes next anyway.
        cluster_smtp.handler.release.set()
        for process in [web.process] + [p.process for h in hosts for p in h.processes() if p]:
            if process is not None and process.poll() is None:
                process.kill()
                process.wait()
        client = redis.Redis.from_url(settings.REDIS_URL)  # the beats' lock and schedule
        keys = list(client.scan_iter(f"{BEAT_KEY_PREFIX}*"))
        if keys:
            client.delete(*keys)


@pytest.fixture
def live(deployment, transactional_db):
    """The deployment with demo data and an API key for this test, and a fresh SMTP log."""
    from deliveries.support.demo import seed_demo
    from notify.api_keys import api_key_issue

    seed_demo()
    issued = api_key_issue(producer_name="cluster", scopes=["notifications:send", "users:read"])
    issued.api_key.rate_per_second = 10_000  # intake's own limit is not what is tested
    issued.api_key.rate_burst = 100_000
    issued.api_key.save()
    deployment.smtp.handler.reset()
    with httpx.Client(
        base_url=deployment.web.url,
        headers={"Authorization": f"Bearer {issued.key}"},
        timeout=30,
    ) as client:
        deployment.client = client
        yield deployment
