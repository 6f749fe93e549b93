"""Digests and delays if unread on real processes: API → relay → RabbitMQ → a worker →
PostgreSQL windows → a countdown close → one email per window at the real SMTP peer;
and a worker killed with SIGKILL while a window is open."""

from __future__ import annotations

import re
import time
import uuid
from datetime import UTC, datetime, timedelta

import pytest

from deliveries.models import DigestItem, DigestWindow
from notify.models import FeedEntry, Recipient
from preferences.services import RequestOrigin, marketing_consent_grant, quiet_hours_set
from tests.digest_data import comment_category
from tests.statuses import settled
from tests.waiting import wait_for

pytestmark = pytest.mark.e2e


def post_comment(api, user_id: str, category: str, number: int) -> str:
    response = api.post(
        "/v1/notifications",
        {
            "event_id": str(uuid.uuid4()),
            "user_id": user_id,
            "category": category,
            "payload": {"thread_id": "t1", "comment_id": f"c{number}", "text": f"c {number}"},
        },
        format="json",
    )
    assert response.status_code == 202, response.content
    return response.json()["notification_id"]


def register(api, user_id: str) -> None:
    response = api.put(f"/v1/users/{user_id}", {"email": f"{user_id}@example.com"}, format="json")
    assert response.status_code in (200, 201), response.content


def listed(mail) -> list[str]:
    """The comment ids a digest email lists (its text part: `[c1] [c2] … from … to …`)."""
    return re.findall(r"\[(c\d+)\]", mail.part("text/plain"))


def after_delay(api, notification_id: str):
    """A check for wait_for: the deliveries once both channels are final (a delayed
    email is `deferred` until its delay ends)."""
    check = settled(api, notification_id, {"inapp", "email"})

    def done() -> dict | None:
        found = check()
        return found if found and found["email"]["status"] != "deferred" else None

    return done


def assert_each_event_in_exactly_one_email(smtp, count: int, emails: int) -> None:
    assert len(smtp.received) == emails
    seen = [c for mail in smtp.received for c in listed(mail)]
    assert sorted(seen) == sorted(f"c{n}" for n in range(1, count + 1)), seen
    subjects = sorted(mail.subject for mail in smtp.received)
    assert subjects == sorted(f"{len(listed(mail))} new comments" for mail in smtp.received)


def test_twenty_comments_in_two_windows_are_two_emails_listing_each_once(api, pipeline):
    smtp = pipeline
    comment_category("comment.windowed", digest_windows={"email": 3})
    register(api, "reader")
    for number in range(1, 11):
        post_comment(api, "reader", "comment.windowed", number)
    wait_for(lambda: smtp.received, timeout=20, what="the first digest")
    for number in range(11, 21):
        post_comment(api, "reader", "comment.windowed", number)
    wait_for(lambda: len(smtp.received) >= 2, timeout=30, what="the second digest")
    wait_for(
        lambda: FeedEntry.objects.filter(recipient__user_id="reader").count() == 20,
        what="20 in-app entries",
    )
    assert_each_event_in_exactly_one_email(smtp, 20, emails=2)
    assert [len(listed(mail)) for mail in smtp.received] == [10, 10]
    assert set(DigestWindow.objects.values_list("state", flat=True)) == {"sent"}


def test_a_worker_killed_while_a_window_is_open_loses_nothing_and_sends_once(
    api, pipeline, workers_with
):
    smtp = pipeline
    comment_category("comment.killed", digest_windows={"email": 6})
    register(api, "survivor")
    (first,) = workers_with(pool="threads", concurrency=4)
    for number in range(1, 6):
        post_comment(api, "survivor", "comment.killed", number)
    wait_for(lambda: DigestItem.objects.count() == 5, what="five events in the open window")
    wait_for(
        lambda: FeedEntry.objects.filter(recipient__user_id="survivor").count() == 5,
        what="their in-app entries",  # (a kill before those is the sweeper's, not ours)
    )
    # SIGKILL: the worker holds the window's countdown close (unacknowledged); RabbitMQ
    # gives it back when the connection drops.
    first.process.kill()
    first.process.wait()
    for number in range(6, 11):  # routed by the next worker
        post_comment(api, "survivor", "comment.killed", number)
    workers_with(pool="threads", concurrency=4)
    wait_for(lambda: smtp.received, timeout=30, what="the first digest")
    for number in range(11, 21):
        post_comment(api, "survivor", "comment.killed", number)
    wait_for(lambda: len(smtp.received) >= 2, timeout=30, what="the second digest")
    wait_for(
        lambda: FeedEntry.objects.filter(recipient__user_id="survivor").count() == 20,
        timeout=30,
        what="20 in-app entries",
    )
    assert_each_event_in_exactly_one_email(smtp, 20, emails=2)


def test_email_delayed_if_unread_goes_only_when_the_entry_was_not_read(api, pipeline):
    smtp = pipeline
    comment_category("comment.delayed", delays_if_unread={"email": 2})
    register(api, "busy")
    read = post_comment(api, "busy", "comment.delayed", 1)
    unread = post_comment(api, "busy", "comment.delayed", 2)
    entry = wait_for(
        lambda: FeedEntry.objects.filter(notification_id=read).first(), what="the entry"
    )
    marked = api.post("/v1/users/busy/feed/read", {"ids": [entry.pk]}, format="json")
    assert marked.json() == {"marked": 1}

    skipped = wait_for(after_delay(api, read), timeout=15, what="the skip")
    sent = wait_for(after_delay(api, unread), timeout=15, what="the email")
    assert skipped["email"]["status"] == "skipped_read"
    assert skipped["email"]["reason"] == "read_in_app"
    assert sent["email"]["status"] == "delivered"
    assert [mail.subject for mail in smtp.received] == ["New comment [c2]"]


def test_a_digest_that_closes_in_quiet_hours_is_held_and_sent_when_they_end(api, pipeline):
    smtp = pipeline
    news = comment_category(
        "news.windowed", digest_windows={"email": 5}, marketing=True, queue="low"
    )
    news.default_channels = ["email"]  # (in-app would count against the daily cap at once)
    news.save()
    register(api, "sleeper")
    sleeper = Recipient.objects.get(user_id="sleeper")  # (no time zone: UTC)
    marketing_consent_grant(recipient=sleeper, origin=RequestOrigin(source="signup"))
    for number in range(1, 4):
        post_comment(api, "sleeper", "news.windowed", number)
    wait_for(
        lambda: DigestWindow.objects.filter(state="open", items_count=3).exists(),
        timeout=30,
        what="the three events in an open window",
    )
    # Quiet hours (to the second) that began a minute ago and end in 8 s: the window,
    # open for 5 s, closes inside them.
    now = datetime.now(UTC).replace(microsecond=0)
    quiet_end = now + timedelta(seconds=8)
    quiet_hours_set(
        recipient=sleeper,
        start=(now - timedelta(minutes=1)).time().replace(tzinfo=None),
        end=quiet_end.time().replace(tzinfo=None),
    )

    window = wait_for(
        lambda: DigestWindow.objects.exclude(state="open").first(), what="the window's close"
    )
    assert window.state == "deferred", window.state
    assert time.time() < quiet_end.timestamp(), "closed after quiet hours: nothing tested"
    assert smtp.received == []
    mail = wait_for(lambda: smtp.received and smtp.received[0], timeout=30, what="the digest")
    assert mail.received_at >= quiet_end.timestamp()
    time.sleep(1)  # (one digest, not one per event)
    assert len(smtp.received) == 1
    assert (mail.subject, listed(mail)) == ("3 new comments", ["c1", "c2", "c3"])
