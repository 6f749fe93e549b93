"""S10: Web Push and FCM deliveries drained by the shipped worker vs a bare concurrent
client posting the same payloads to the same local push service.

Peers, in this process, from the test suite: a Web Push service that checks VAPID and
decrypts every push like a browser (tests/deliveries/push/peer.py), answering each after
BENCH_S10_PUSH_DELAY seconds (0.02: a push service nearby), and a local FCM (its OAuth
token endpoint and v1 send API, tests/deliveries/push/fcm_peer.py). BENCH_S10_PUSHES people
(2,000), each with one browser and one app, get one `order.shipped` event each on one
channel, preloaded through the API with the worker stopped; then scripts/worker.sh
medium and the outbox relay are started and timed from the first routed event to the
last delivery final (bench/pipeline_drains.py). One push per person: a person's pushes
go one after another and at most NOTIFY_PUSH_PER_RECIPIENT_LIMIT wait at once, so this
measures the channel, not one person's lane.

Baselines (bench/push_bare.py, a process of its own, from its first post to its last
answer): for Web Push, pywebpush's WebPusher encrypting and posting the same payloads
NOTIFY_WEBPUSH_CONCURRENCY (16) at once; for FCM, the same v1 messages posted with
one OAuth token, as many at once as firebase-admin's send_each keeps connections
(FCM_BARE_CONCURRENCY). The provider rate limits (NOTIFY_RATE_WEBPUSH, NOTIFY_RATE_FCM)
are lifted: a capacity figure, not the configured pace. BENCH_RUNS of each, alternating,
baseline first; medians. Worker start-up is printed on a line of its own.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from bench.config import ROOT, S10_TARGET, BenchError, env_float, env_int
from bench.costs import costs_text, median_costs
from bench.pipeline_drains import Drain, pipeline_run, worker_cpu_line
from bench.processes import LOG_DIR, python
from bench.report import phase, ratio, verdict

if TYPE_CHECKING:
    from bench.runner import Bench

PEOPLE = "bench-s10-"
GROUP = "s10"  # the push service's subscriber-name group: its delay and in-flight count
CATEGORY = "order.shipped"
VAPID_KEY = ROOT / "tests" / "deliveries" / "push" / "vapid_test_private.pem"
VAPID_SUBJECT = "mailto:bench@notify.example.com"
WEBPUSH_CONCURRENCY = 16  # the channel's default NOTIFY_WEBPUSH_CONCURRENCY
FCM_BARE_CONCURRENCY = 100  # the connections firebase-admin's session keeps (fcm_app.py)
TTL = 3600
LIFTED = "1000000:1000000"
BARE_TIMEOUT = 600.0


@dataclass(frozen=True)
class Bare:
    """One bare drain: n pushes, first post -> last answer (time.time())."""

    n: int
    first: float
    last: float
    statuses: dict[str, int]

    @property
    def rate(self) -> float:
        return self.n / (self.last - self.first)


def scenario_s10(bench: Bench) -> None:
    """Web Push, then FCM: BENCH_RUNS bare drains and worker drains each; the ratios."""
    from tests.deliveries.push.fcm_peer import PROJECT, FcmService
    from tests.deliveries.push.peer import PushService

    n = max(1, env_int("BENCH_S10_PUSHES", 2000))
    delay = env_float("BENCH_S10_PUSH_DELAY", 0.02)
    LOG_DIR.mkdir(parents=True, exist_ok=True)
    push, fcm = PushService(), FcmService(LOG_DIR)
    push.start()
    fcm.start()
    push.answer_after(GROUP, delay)
    try:
        with phase(f"S10: seeding {n} people, each with a browser and an app"):
            users, webpush_jobs, fcm_jobs = _seed(n, push)
        bench.close_db()
        env = {
            **bench.env,
            "WEBPUSH_VAPID_PRIVATE_KEY": str(VAPID_KEY),
            "WEBPUSH_VAPID_SUBJECT": VAPID_SUBJECT,
            "WEBPUSH_ALLOWED_ORIGINS": push.origin,
            "FCM_CREDENTIALS": str(fcm.credentials_path),
            "FCM_SEND_URL": fcm.send_url,
            "NOTIFY_CHANNELS_ENABLED": "inapp,email,webpush,fcm",
            "NOTIFY_RATE_WEBPUSH": LIFTED,
            "NOTIFY_RATE_FCM": LIFTED,
        }
        webpush_spec = {
            "vapid_key": str(VAPID_KEY),
            "subject": VAPID_SUBJECT,
            "origin": push.origin,
            "ttl": TTL,
            "concurrency": WEBPUSH_CONCURRENCY,
            "jobs": webpush_jobs,
        }
        fcm_spec = {
            "credentials": str(fcm.credentials_path),
            "url": fcm.send_url.format(project_id=PROJECT),
            "concurrency": FCM_BARE_CONCURRENCY,
            "jobs": fcm_jobs,
        }
        for channel, spec in (("webpush", webpush_spec), ("fcm", fcm_spec)):
            bares: list[Bare] = []
            drains: list[Drain] = []
            peaks: list[tuple[int, int]] = []
            for run in range(bench.config.runs):
                with phase(f"S10 {channel} run {run + 1} of {bench.config.runs}"):
                    push.most_in_flight.clear()
                    bares.append(_bare(channel, spec, n))
                    bare_peak = push.most_in_flight.get(GROUP, 0)
                    push.most_in_flight.clear()
                    drains.append(
                        pipeline_run(
                            bench,
                            env,
                            n,
                            True,
                            category=CATEGORY,
                            channels=(channel,),
                            users=users,
                            label=f"S10-{channel}",
                        )
                    )
                    peaks.append((bare_peak, push.most_in_flight.get(GROUP, 0)))
            _report(channel, n, delay, bares, drains, peaks)
    finally:
        push.stop()
        fcm.stop()
        bench.close_db()


def _report(
    channel: str,
    n: int,
    delay: float,
    bares: list[Bare],
    drains: list[Drain],
    peaks: list[tuple[int, int]],
) -> None:
    subject = statistics.median(d.rate for d in drains)
    baseline = statistics.median(b.rate for b in bares)
    value = ratio(subject, baseline)
    if channel == "webpush":
        service = f"the local Web Push service (decrypting, answering after {delay * 1000:g} ms)"
        bare = f"pywebpush, {WEBPUSH_CONCURRENCY} at once"
        lifted = "NOTIFY_RATE_WEBPUSH"
    else:
        service = "the local FCM (v1 send API)"
        bare = f"requests, {FCM_BARE_CONCURRENCY} at once, one OAuth token"
        lifted = "NOTIFY_RATE_FCM"
    print(
        f"S10 {channel} drain: {value:.3g}x a bare client ({subject:.0f} pushes/s vs "
        f"{baseline:.0f}/s; {n} pushes to {n} people, one each, to {service}; worker: "
        f"scripts/worker.sh medium + outbox relay, first routed event -> last delivery "
        f"final; bare: {bare}, first post -> last answer; {lifted} lifted for a capacity "
        f"figure; medians of {len(drains)}; {verdict(value, S10_TARGET, at_least=True)})"
    )
    print(
        f"S10 {channel} worker start-up (not in the ratio): worker start -> first routed "
        f"event {statistics.median(d.startup for d in drains):.1f} s"
    )
    if channel == "webpush":
        print(
            f"S10 webpush most pushes in flight at the push service: bare "
            f"{max(p[0] for p in peaks)}, worker {max(p[1] for p in peaks)}"
        )
    costs = [d.costs for d in drains if d.costs]
    if costs:
        print(
            f"S10 {channel} per push (intake + worker + relay): {costs_text(median_costs(costs))}"
        )
    if line := worker_cpu_line(f"S10 {channel}", "push", drains):
        print(line)
    for b in bares:
        if set(b.statuses) - {"200", "201"}:
            print(f"S10 {channel}: WARNING the bare client got {b.statuses}")


def _bare(channel: str, spec: dict[str, Any], n: int) -> Bare:
    """Run bench/push_bare.py on `spec` in a process of its own; its drain."""
    return bare_client_run(
        ["bench.push_bare", channel],
        spec,
        n,
        jobs=f"s10-{channel}",
        what=f"the bare {channel} client",
    )


def bare_client_run(
    module: list[str], spec: dict[str, Any], n: int, *, jobs: str, what: str
) -> Bare:
    """Run a bare client (`python -m` and `module`'s words, then the jobs file it reads)
    in a process of its own, on `spec` written to var/bench/<jobs>-jobs.json; its drain,
    from the JSON it prints last."""
    path = LOG_DIR / f"{jobs}-jobs.json"
    LOG_DIR.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(spec), encoding="utf-8")
    done = subprocess.run(
        [python(), "-m", *module, str(path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=BARE_TIMEOUT,
        check=False,
    )
    if done.returncode != 0:
        raise BenchError(f"{what} failed:\n{done.stdout}{done.stderr[-2000:]}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    return Bare(n, result["first"], result["last"], result["statuses"])


def _seed(n: int, push: Any) -> tuple[list[str], list[dict], list[dict]]:
    """n people, each with one browser subscribed at the push service and one FCM app;
    their user ids, and the bare clients' jobs: the same payloads the channels send."""
    from django.utils import timezone
    from firebase_admin import messaging

    from deliveries.models import Device, DeviceKind
    from notify.models import Recipient

    users = [f"{PEOPLE}{number}" for number in range(n)]
    Recipient.objects.bulk_create(
        [Recipient(user_id=user, locale="en") for user in users], ignore_conflicts=True
    )
    recipients = dict(Recipient.objects.filter(user_id__in=users).values_list("user_id", "pk"))
    # The push service is new each run: the browsers subscribe again.
    Device.objects.filter(recipient_id__in=recipients.values()).delete()
    devices, webpush_jobs, fcm_jobs = [], [], []
    for number, user in enumerate(users):
        name = f"{GROUP}.{number}"
        _, body = push.subscribe(name)
        token = f"bench-s10-token-{number}"
        devices += [
            Device(
                recipient_id=recipients[user],
                kind=DeviceKind.WEBPUSH,
                installation_id=name,
                endpoint=body["endpoint"],
                p256dh=body["keys"]["p256dh"],
                auth=body["keys"]["auth"],
            ),
            Device(
                recipient_id=recipients[user],
                kind=DeviceKind.FCM,
                installation_id=f"{name}-app",
                token=token,
                platform="android",
            ),
        ]
        # What deliveries/channels/webpush.py and fcm.py make of an order.shipped event.
        order = f"S-{number}"
        title, text, url = (
            f"Order {order} shipped",
            "Expected delivery: 2026-12-03",
            f"/orders/{order}",
        )
        notification_id = str(uuid.uuid4())
        payload = {
            "notification_id": notification_id,
            "category": CATEGORY,
            "title": title,
            "body": text,
            "url": url,
        }
        webpush_jobs.append(
            {
                "endpoint": body["endpoint"],
                "keys": body["keys"],
                "payload": json.dumps(payload, ensure_ascii=False, separators=(",", ":")),
            }
        )
        message = messaging.Message(
            token=token,
            notification=messaging.Notification(title=title, body=text),
            data={"notification_id": notification_id, "url": url},
            android=messaging.AndroidConfig(ttl=TTL, priority="high"),
            apns=messaging.APNSConfig(
                headers={
                    "apns-priority": "10",
                    "apns-expiration": str(int(timezone.now().timestamp()) + TTL),
                }
            ),
        )
        fcm_jobs.append({"message": messaging._MessagingService.encode_message(message)})
    Device.objects.bulk_create(devices, batch_size=1000)
    return users, webpush_jobs, fcm_jobs
