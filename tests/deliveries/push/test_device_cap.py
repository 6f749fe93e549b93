"""A person's devices are capped (NOTIFY_DEVICES_PER_RECIPIENT): registering one more
deactivates the one registered least recently, which then receives nothing."""

from __future__ import annotations

import threading

import pytest
from django.db import connection

from deliveries.models import Delivery, Device, DeviceKind
from deliveries.pipeline.devices import device_register
from notify.models import Recipient
from tests.deliveries.push.peer import Subscriber, b64url
from tests.deliveries.push.test_webpush import register_device, register_user, send_order
from tests.waiting import wait_for

CAP = 20  # the default of NOTIFY_DEVICES_PER_RECIPIENT
KEYS = Subscriber("shared")  # a browser's keys; only the endpoint tells these apart


def browser(number: int) -> dict:
    return {
        "kind": "webpush",
        "endpoint": f"https://push.example/sub/{number}",
        "keys": {"p256dh": KEYS.p256dh, "auth": b64url(KEYS.auth)},
    }


def phone(number: int) -> dict:
    return {"kind": "fcm", "token": f"fcm-token-{number}", "platform": "android"}


def active_ids(user_id: str) -> set[int]:
    return set(
        Device.objects.filter(recipient__user_id=user_id, active=True).values_list("pk", flat=True)
    )


@pytest.fixture
def no_api_rate_limit(settings):
    """500 registrations in a few seconds are this test's point, not the key's rate."""
    settings.NOTIFY_API_RATE_PER_SECOND = 10_000
    settings.NOTIFY_API_RATE_BURST = 10_000


def test_registering_500_devices_for_one_person_leaves_the_20_registered_last_active(
    api, no_api_rate_limit
):
    register_user(api, "cap-1")
    ids = [register_device(api, "cap-1", browser(n) if n % 2 else phone(n)) for n in range(500)]

    assert active_ids("cap-1") == set(ids[-CAP:])
    evicted = Device.objects.filter(pk__in=ids[:-CAP])
    assert evicted.count() == 500 - CAP  # deactivated, not deleted: their history stays
    assert set(evicted.values_list("active", "deactivated_reason")) == {(False, "over_device_cap")}


def test_a_device_registering_again_is_seen_again_and_the_least_recent_one_goes(
    api, no_api_rate_limit
):
    register_user(api, "cap-2")
    ids = [register_device(api, "cap-2", phone(n)) for n in range(CAP + 5)]
    oldest_kept = ids[5]

    again = register_device(api, "cap-2", phone(0))  # the first, long evicted, comes back

    assert again == ids[0]  # the same device, active again under its own id
    assert active_ids("cap-2") == {ids[0], *ids[6:]}
    assert not Device.objects.get(pk=oldest_kept).active
    # Refreshing one that is active evicts nobody.
    register_device(api, "cap-2", phone(10))
    assert active_ids("cap-2") == {ids[0], *ids[6:]}


def test_registrations_at_the_same_moment_never_leave_more_than_20_active(transactional_db):
    person = Recipient.objects.create(user_id="cap-3", locale="en")
    for n in range(CAP - 1):
        device_register(recipient=person, kind=DeviceKind.FCM, token=f"before-{n}")
    threads_count, each = 6, 3
    start = threading.Barrier(threads_count)
    errors: list[BaseException] = []

    def register_some(thread: int) -> None:
        try:
            start.wait()
            for n in range(each):
                device_register(recipient=person, kind=DeviceKind.FCM, token=f"t{thread}-{n}")
        except BaseException as error:  # reported by the main thread
            errors.append(error)
        finally:
            connection.close()

    threads = [threading.Thread(target=register_some, args=(t,)) for t in range(threads_count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert not errors
    assert Device.objects.filter(recipient=person).count() == CAP - 1 + threads_count * each
    assert len(active_ids("cap-3")) == CAP


@pytest.mark.e2e
def test_devices_evicted_over_the_cap_receive_no_push(
    api, push_service, workers_with, no_api_rate_limit
):
    # Every kept browser may have its push at once, so only the cap decides who gets one.
    workers_with(NOTIFY_PUSH_PER_RECIPIENT_LIMIT=str(CAP))
    register_user(api, "cap-4")
    names = [f"cap-4-browser-{n}" for n in range(500)]
    ids = [register_device(api, "cap-4", push_service.subscribe(name)[1]) for name in names]
    assert active_ids("cap-4") == set(ids[-CAP:])

    notification_id = send_order(api, "cap-4")

    def pushes_settled() -> bool:
        rows = Delivery.objects.filter(notification_id=notification_id, channel="webpush")
        return rows.count() == CAP and not rows.filter(status__in=["queued", "sending"]).exists()

    wait_for(pushes_settled, timeout=60, what="a push to each device kept")
    targets = Delivery.objects.filter(notification_id=notification_id, channel="webpush")
    assert set(targets.values_list("target", flat=True)) == {str(pk) for pk in ids[-CAP:]}
    for name in names[-CAP:]:
        assert len(push_service.accepted_for(name)) == 1
    assert not [name for name in names[:-CAP] if push_service.deliveries_to(name)]
