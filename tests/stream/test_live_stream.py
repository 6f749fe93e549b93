"""The live stream and push only to silent devices, on a real ASGI server."""

from __future__ import annotations

import pytest

from deliveries.pipeline.live import device_is_live
from tests.deliveries.push.test_webpush import (
    push_status,
    register_device,
    register_user,
    send_order,
)
from tests.stream.sse_client import SseClient
from tests.waiting import wait_for

pytestmark = pytest.mark.e2e


def open_stream(asgi_server, producer_key, user_id, device_id, last_event_id=None) -> SseClient:
    headers = {"Authorization": f"Bearer {producer_key.key}", "Accept": "text/event-stream"}
    if last_event_id is not None:
        headers["Last-Event-ID"] = str(last_event_id)
    url = f"{asgi_server}/v1/users/{user_id}/stream?device_id={device_id}"
    return SseClient(url, headers=headers).start()


def test_a_connected_device_gets_the_notification_live_not_by_push_and_replays_what_it_missed(
    api, pipeline, push_service, asgi_server, producer_key
):
    register_user(api, "live-1")
    _, body = push_service.subscribe("live-phone")
    device_id = register_device(api, "live-1", body)

    stream = open_stream(asgi_server, producer_key, "live-1", device_id)
    wait_for(lambda: device_is_live(device_id=device_id), what="the device to be live")
    first = send_order(api, "live-1", channels=["inapp", "webpush"])

    # Sooner than the stream's heartbeat (3 s) or safety poll (30 s): only the pub/sub
    # wake-up that follows the feed write can bring it this fast.
    event = wait_for(
        lambda: [e for e in stream.events if e["data"]["notification_id"] == first],
        timeout=2,
        what="the live event",
    )[0]
    assert event["data"]["title"] == "Order A-7 is on its way"
    skipped = wait_for(lambda: push_status(api, first), what="the push decision")
    assert skipped["status"] == "skipped_live"
    assert push_service.deliveries_to("live-phone") == []
    wait_for(lambda: "heartbeat" in stream.comments, what="a heartbeat")

    stream.stop()
    wait_for(lambda: not device_is_live(device_id=device_id), what="the device to go offline")
    second = send_order(api, "live-1", channels=["inapp", "webpush"])
    assert wait_for(lambda: push_status(api, second), what="the push")["status"] == "delivered"
    assert len(push_service.accepted_for("live-phone")) == 1

    again = open_stream(asgi_server, producer_key, "live-1", device_id, event["id"])
    try:
        replayed = wait_for(lambda: again.events, what="the missed entry")
        assert [e["data"]["notification_id"] for e in replayed] == [second]
    finally:
        again.stop()


def test_the_stream_refuses_a_missing_or_wrong_credential(api, pipeline, asgi_server):
    import httpx

    register_user(api, "live-2")
    url = f"{asgi_server}/v1/users/live-2/stream"
    assert httpx.get(url).status_code == 401
    refused = httpx.get(url, headers={"Authorization": "Bearer nope"})
    assert refused.status_code == 401
    assert refused.json()["error"]["code"] == "authentication_failed"


def test_a_live_device_still_gets_the_push_when_the_stream_had_nothing_to_show(
    api, pipeline, push_service, asgi_server, producer_key
):
    from templates_admin.models import Template

    register_user(api, "live-3")
    _, body = push_service.subscribe("live-tablet")
    device_id = register_device(api, "live-3", body)
    stream = open_stream(asgi_server, producer_key, "live-3", device_id)
    try:
        wait_for(lambda: device_is_live(device_id=device_id), what="the device to be live")

        # Push only: no feed entry, so nothing reached the person on the stream.
        push_only = send_order(api, "live-3", channels=["webpush"])
        assert wait_for(lambda: push_status(api, push_only), what="the push")["status"] == (
            "delivered"
        )

        # In-app opted out: again no feed entry.
        opted_out = api.put(
            "/v1/users/live-3/preferences",
            {"categories": {"order.shipped": {"inapp": False}}},
            format="json",
        )
        assert opted_out.status_code == 200, opted_out.content
        no_inapp = send_order(api, "live-3", channels=["inapp", "webpush"])
        assert wait_for(lambda: push_status(api, no_inapp), what="the push")["status"] == (
            "delivered"
        )
        api.put(
            "/v1/users/live-3/preferences",
            {"categories": {"order.shipped": {"inapp": True}}},
            format="json",
        )

        # In-app failed (no published template): the feed entry was never written.
        Template.objects.filter(category__key="order.shipped", channel="inapp").update(
            published_version=None
        )
        failed = send_order(api, "live-3", channels=["inapp", "webpush"])
        assert wait_for(lambda: push_status(api, failed), what="the push")["status"] == (
            "delivered"
        )

        assert len(push_service.accepted_for("live-tablet")) == 3
        assert stream.events == []  # the stream never had any of them
    finally:
        stream.stop()
