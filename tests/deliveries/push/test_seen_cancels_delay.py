"""A delay if unread on real processes: an entry the live stream showed the person
counts as read, and the delayed email is not sent."""

from __future__ import annotations

import pytest

from tests.deliveries.digests.test_digests_e2e import after_delay, post_comment, register
from tests.digest_data import comment_category
from tests.stream.sse_client import SseClient
from tests.waiting import wait_for

pytestmark = pytest.mark.e2e


def test_an_entry_seen_on_the_live_stream_cancels_the_delayed_email(
    api, pipeline, asgi_server, producer_key
):
    smtp = pipeline
    comment_category("comment.watched", delays_if_unread={"email": 3})
    register(api, "watcher")
    register(api, "away")
    headers = {"Authorization": f"Bearer {producer_key.key}", "Accept": "text/event-stream"}
    # The inbox's stream: no device id (the person is reading the feed, not a phone).
    stream = SseClient(f"{asgi_server}/v1/users/watcher/stream", headers=headers).start()
    try:
        wait_for(lambda: stream.status == 200, what="the stream")
        seen = post_comment(api, "watcher", "comment.watched", 1)
        unseen = post_comment(api, "away", "comment.watched", 2)
        wait_for(
            lambda: [e for e in stream.events if e["data"]["notification_id"] == seen],
            what="the entry on the stream",
        )
        skipped = wait_for(after_delay(api, seen), timeout=20, what="the skip")
        sent = wait_for(after_delay(api, unseen), timeout=20, what="the email")
    finally:
        stream.stop()
    assert (skipped["email"]["status"], skipped["email"]["reason"]) == ("skipped_read", "seen_live")
    assert sent["email"]["status"] == "delivered"
    assert [mail.subject for mail in smtp.received] == ["New comment [c2]"]
