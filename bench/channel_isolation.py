"""S8: login codes by SMS and Web Push while the SMTP relay of the same class is slow.

The shipped `high` worker (scripts/worker.sh high) and relay (scripts/relay.sh
high,medium) run against real local peers in this process: an SMTP server whose answer
to each message can be held back (tests/peers/smtp.py), an SMSC (tests/deliveries/sms/smsc.py) and
a Web Push service that checks VAPID and decrypts like a browser (tests/deliveries/push/peer.py).
Each cycle posts BENCH_S8_CODES `security.login_code` events (SMS + Web Push), each to
its own person, 50 ms apart, and times each from its POST to its arrival at the SMSC and
at the push service: first idle, then with the SMTP relay answering every message after
BENCH_S8_SMTP_DELAY seconds (20) and BENCH_S8_EMAILS login codes by email (to as many
people) queued on `high` just before. The figure is the p90 with the slow relay over the
p90 idle (medians over BENCH_RUNS cycles). After each slow cycle the relay is made fast
again and every email must arrive, once: the backlog's drain time is printed too.
"""

from __future__ import annotations

import logging
import os
import statistics
import time
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING

from bench.config import ROOT, BenchError
from bench.login_codes import wait_ready
from bench.report import percentile, phase, ratio, verdict

if TYPE_CHECKING:
    from bench.runner import Bench

LOGIN_CATEGORY = "security.login_code"
INTERVAL = 0.05  # seconds between two codes' POSTs
ARRIVAL_TIMEOUT = 120.0
SYSTEM_ID, PASSWORD = "bench-s8", "bench-s8"
PEOPLE = "bench-s8-code-"
MAILED = "bench-s8-mail-"


@dataclass(frozen=True)
class Cycle:
    sms: list[float]  # seconds, POST -> the SMSC accepted it
    push: list[float]  # seconds, POST -> the push service accepted it

    @property
    def p90(self) -> float:
        return percentile(self.sms + self.push, 0.9)


def scenario_s8(bench: Bench) -> None:
    """Time login codes by SMS and push idle and beside a slow SMTP relay; print the ratio."""
    from tests.deliveries.push.peer import PushService
    from tests.deliveries.sms.smsc import Smsc
    from tests.peers.smtp import SmtpPeer

    codes = int(os.environ.get("BENCH_S8_CODES", "50"))
    emails = int(os.environ.get("BENCH_S8_EMAILS", "40"))
    delay = float(os.environ.get("BENCH_S8_SMTP_DELAY", "20"))
    logging.getLogger("mail.log").setLevel(logging.WARNING)  # aiosmtpd: a line per session
    smtp, smsc, push = SmtpPeer(), Smsc(system_id=SYSTEM_ID, password=PASSWORD), PushService()
    smtp.start()
    smsc.start()
    push.start()
    with phase(f"S8: seeding {codes} people with a phone and a browser, {emails} with email"):
        people = _seed(codes, emails, push)
    bench.close_db()
    env = {
        **bench.env,
        "EMAIL_HOST": "127.0.0.1",
        "EMAIL_PORT": str(smtp.port),
        "SMPP_HOST": "127.0.0.1",
        "SMPP_PORT": str(smsc.port),
        "SMPP_SYSTEM_ID": SYSTEM_ID,
        "SMPP_PASSWORD": PASSWORD,
        "SMPP_TPS": "1000",  # the SMSC's own throttle is not what is measured here
        "WEBPUSH_VAPID_PRIVATE_KEY": str(
            ROOT / "tests" / "deliveries" / "push" / "vapid_test_private.pem"
        ),
        "WEBPUSH_VAPID_SUBJECT": "mailto:bench@notify.example.com",
        "WEBPUSH_ALLOWED_ORIGINS": push.origin,
        "NOTIFY_CHANNELS_ENABLED": "inapp,email,sms,webpush",
    }
    stamp = f"s8-{time.time_ns()}"
    key = f"bench:ready:{stamp}:high"
    procs = [
        bench.stack.start(
            "s8-worker-high",
            ["bash", "scripts/worker.sh", "high"],
            {**env, "BENCH_READY_KEY": key},
        ),
        bench.stack.start("s8-relay", ["bash", "scripts/relay.sh", "high,medium"], env),
    ]
    idle: list[Cycle] = []
    slow: list[Cycle] = []
    drains: list[float] = []
    try:
        wait_ready([key], procs)
        _cycle(bench, f"{stamp}-warm", people[:2], smsc, push, procs)
        for run in range(bench.config.runs):
            idle.append(_cycle(bench, f"{stamp}-idle{run}", people, smsc, push, procs))
            smtp.handler.data_delay = delay
            mails = _post_emails(bench, f"{stamp}-mail{run}", emails)
            _wait_sending(procs)
            slow.append(_cycle(bench, f"{stamp}-slow{run}", people, smsc, push, procs))
            smtp.handler.data_delay = 0.0
            clock = time.monotonic()
            _wait_emails(smtp, mails, procs)
            drains.append(time.monotonic() - clock)
            smtp.handler.reset()
    finally:
        for proc in procs:
            bench.stack.stop(proc)
        smtp.stop()
        smsc.stop()
        push.stop()
        bench.close_db()
    idle_p90 = statistics.median(c.p90 for c in idle) * 1000
    slow_p90 = statistics.median(c.p90 for c in slow) * 1000
    value = ratio(slow_p90, idle_p90)
    print(
        f"S8 login codes by SMS + push beside a {delay:g} s-per-message SMTP relay: p90 "
        f"{value:.3g}x idle ({slow_p90:.0f} ms vs {idle_p90:.0f} ms, POST -> SMSC / push "
        f"service, {codes} codes to {codes} people, {emails} emails queued on high first; "
        f"{verdict(value, 2, at_least=False)})"
    )
    for channel in ("sms", "push"):
        busy = statistics.median(percentile(getattr(c, channel), 0.9) for c in slow) * 1000
        calm = statistics.median(percentile(getattr(c, channel), 0.9) for c in idle) * 1000
        print(f"S8 p90 {channel}: {busy:.0f} ms beside the slow relay, {calm:.0f} ms idle")
    print(
        f"S8 email backlog ({emails}) drained {statistics.median(drains):.1f} s after the relay "
        f"was fast again (median); every email arrived exactly once"
    )


def _seed(codes: int, emails: int, push) -> list[tuple[str, str, str]]:
    """The people: (user id, phone, push subscriber name) for the codes, each with one
    live browser at the push service; and the people the emails go to."""
    from deliveries.models import Device, DeviceKind
    from notify.models import Category, Recipient
    from templates_admin.models import Template
    from templates_admin.services import template_version_create, template_version_publish

    category = Category.objects.get(key=LOGIN_CATEGORY)
    template, _ = Template.objects.get_or_create(category=category, channel="webpush", locale="en")
    if template.published_version_id is None:
        version = template_version_create(
            template=template, fields={"title": "Login code", "body": "Code: {{ code }}"}
        )
        template_version_publish(version=version)
    people = []
    for number in range(codes):
        user = f"{PEOPLE}{number}"
        phone = f"7999{number:07d}"
        recipient, _ = Recipient.objects.update_or_create(
            user_id=user, defaults={"phone": phone, "locale": "en"}
        )
        name = f"s8-{uuid.uuid4().hex[:8]}"
        _, body = push.subscribe(name)
        Device.objects.filter(recipient=recipient).delete()
        Device.objects.create(
            recipient=recipient,
            kind=DeviceKind.WEBPUSH,
            installation_id=name,
            endpoint=body["endpoint"],
            p256dh=body["keys"]["p256dh"],
            auth=body["keys"]["auth"],
        )
        people.append((user, phone, name))
    Recipient.objects.bulk_create(
        [
            Recipient(user_id=f"{MAILED}{n}", email=f"{MAILED}{n}@example.com", locale="en")
            for n in range(emails)
        ],
        ignore_conflicts=True,
    )
    return people


def _post(client, event_id: str, user: str, channels: list[str]) -> None:
    response = client.post(
        "/v1/notifications",
        {
            "event_id": event_id,
            "user_id": user,
            "category": LOGIN_CATEGORY,
            "channels": channels,
            "payload": {"code": "135790"},
        },
        content_type="application/json",
    )
    if response.status_code != 202:
        raise BenchError(f"S8 POST answered {response.status_code}: {response.content!r}")


def _client(bench: Bench):
    from django.test import Client

    return Client(HTTP_AUTHORIZATION=f"Bearer {bench.api_key}")


def _cycle(bench: Bench, stamp: str, people, smsc, push, procs) -> Cycle:
    """Post one code per person (SMS + Web Push), wait for all to arrive, time each."""
    client = _client(bench)
    posted: dict[str, tuple[float, float]] = {}  # user -> (monotonic, wall clock)
    smsc_seen, push_seen = len(smsc.submits), len(push.received)
    for user, _, _ in people:
        due = time.monotonic() + INTERVAL
        posted[user] = (time.monotonic(), time.time())
        _post(client, f"{stamp}-{user}", user, ["sms", "webpush"])
        time.sleep(max(0.0, due - time.monotonic()))
    bench.close_db()
    by_phone = {phone: user for user, phone, _ in people}
    by_name = {name: user for user, _, name in people}
    deadline = time.monotonic() + ARRIVAL_TIMEOUT
    while True:
        sms = {
            by_phone[s.destination_addr]: s.at
            for s in smsc.submits[smsc_seen:]
            if s.status == 0 and s.destination_addr in by_phone
        }
        pushes = {
            by_name[r.subscriber]: r.at
            for r in push.received[push_seen:]
            if 200 <= r.status < 300 and r.subscriber in by_name
        }
        if len(sms) == len(people) and len(pushes) == len(people):
            break
        if time.monotonic() > deadline:
            raise BenchError(
                f"S8 {stamp}: {len(sms)} SMS and {len(pushes)} pushes of {len(people)} "
                f"arrived in {ARRIVAL_TIMEOUT:.0f} s"
            )
        for proc in procs:
            proc.check()
        time.sleep(0.05)
    return Cycle(
        [at - posted[user][0] for user, at in sms.items()],
        [at - posted[user][1] for user, at in pushes.items()],
    )


def _post_emails(bench: Bench, stamp: str, count: int) -> set[str]:
    """Queue `count` login codes by email, each to its own person; their addresses."""
    client = _client(bench)
    for number in range(count):
        _post(client, f"{stamp}-{number}", f"{MAILED}{number}", ["email"])
    bench.close_db()
    return {f"{MAILED}{number}@example.com" for number in range(count)}


def _wait_sending(procs, timeout: float = 30.0) -> None:
    """Until the worker holds emails at the slow relay (the SMTP peer has them in DATA)."""
    from deliveries.models import Delivery, DeliveryStatus

    deadline = time.monotonic() + timeout
    while not Delivery.objects.filter(channel="email", status=DeliveryStatus.SENDING).exists():
        if time.monotonic() > deadline:
            raise BenchError("S8: no email reached the slow relay")
        for proc in procs:
            proc.check()
        time.sleep(0.1)


def _wait_emails(smtp, addresses: set[str], procs) -> None:
    """Until every email arrived; fail if one is missing or came twice."""
    deadline = time.monotonic() + ARRIVAL_TIMEOUT * 2
    while True:
        got = [rcpt for mail in smtp.received for rcpt in mail.rcpt_tos if rcpt in addresses]
        if len(got) >= len(addresses):
            break
        if time.monotonic() > deadline:
            raise BenchError(f"S8: {len(got)} of {len(addresses)} emails arrived")
        for proc in procs:
            proc.check()
        time.sleep(0.1)
    if sorted(got) != sorted(addresses):
        raise BenchError(f"S8: emails lost or sent twice: {len(got)} for {len(addresses)}")
