"""ADR-048 as a user sees it: one recipient with a hundred hanging devices cannot slow
anybody else's push, with the sender pool sized as in production (8 senders)."""

from __future__ import annotations

import time

import pytest

from flow.fairness import push_drops_total, push_slots_held
from notify.models import Recipient
from tests.deliveries.push.test_webpush import register_device, register_user, send_order
from tests.waiting import wait_for

pytestmark = pytest.mark.e2e


def test_a_hundred_hanging_devices_do_not_delay_another_recipients_push(
    api, pipeline, push_service, workers_with, settings
):
    # A hundred devices for one person: past the per-person cap, raised for this test.
    settings.NOTIFY_DEVICES_PER_RECIPIENT = 100
    # One worker with the production sender pool: 8 threads, the production push timeouts.
    (worker,) = workers_with(pool="threads", concurrency=8, NOTIFY_PUSH_REQUEST_TIMEOUT="5")
    register_user(api, "hog")
    register_user(api, "calm")
    push_service.slow["hog"] = 60  # never answers within the request timeout
    for number in range(100):
        _, body = push_service.subscribe(f"hog.device{number}")
        register_device(api, "hog", body)
    _, body = push_service.subscribe("calm.phone")
    register_device(api, "calm", body)
    drops_before = push_drops_total()
    hog = Recipient.objects.get(user_id="hog")

    send_order(api, "hog")
    posted = time.time()
    send_order(api, "calm")

    arrived = wait_for(lambda: push_service.accepted_for("calm.phone"), what="the calm push")
    assert arrived[0].at - posted < 2.0

    # While the hog's pushes hang, never more than 4 of its jobs exist.
    deadline = time.monotonic() + 3
    while time.monotonic() < deadline:
        assert push_slots_held(recipient_id=hog.pk) <= 4
        time.sleep(0.1)
    assert push_service.most_in_flight["hog"] <= 4
    assert push_drops_total() - drops_before == 96
    log = worker.log_path.read_text(errors="replace")
    assert log.count("push fairness: dropped") <= 1


def test_a_person_with_more_browsers_than_the_limit_gets_pushes_on_every_browser_in_turn(
    api, pipeline, push_service
):
    register_user(api, "six-browsers")
    browsers = [f"six.browser{number}" for number in range(6)]
    for name in browsers:
        _, body = push_service.subscribe(name)
        register_device(api, "six-browsers", body)
    person = Recipient.objects.get(user_id="six-browsers")
    drops_before = push_drops_total()

    for _ in range(3):
        notification_id = send_order(api, "six-browsers")

        def settled_pushes(notification_id=notification_id):
            rows = api.get(f"/v1/notifications/{notification_id}/status").json()["deliveries"]
            pushes = [d for d in rows if d["channel"] == "webpush"]
            done = len(pushes) == 6 and all(
                d["status"] not in ("queued", "sending", "retrying") for d in pushes
            )
            return pushes if done else None

        pushes = wait_for(settled_pushes, timeout=30, what="the six browsers' pushes")
        outcomes = sorted((d["status"], d["reason"]) for d in pushes)
        assert outcomes == [("delivered", "")] * 4 + [("suppressed", "push_limit")] * 2
        # The next notification finds every slot free, as a person's next one would.
        wait_for(
            lambda: push_slots_held(recipient_id=person.pk) == 0, what="the slots to be released"
        )

    # Three notifications, four slots each: every browser got its two, none was left out.
    assert {name: len(push_service.accepted_for(name)) for name in browsers} == dict.fromkeys(
        browsers, 2
    )
    assert push_drops_total() - drops_before == 6
