"""The feed and the unread counter as an app sees them."""

from __future__ import annotations

import threading

import pytest
from django.db import connection
from django.test import override_settings

from notify.feed import feed_entry_create, feed_mark_read
from notify.models import Category, FeedEntry, Notification, Producer, Recipient
from notify.unread import unread_count, unread_key, unread_reconcile


def make_entries(recipient: Recipient, count: int, *, start: int = 0) -> list[FeedEntry]:
    producer, _ = Producer.objects.get_or_create(name="feed-tests")
    category = Category.objects.get(key="order.shipped")
    entries = []
    for number in range(start, start + count):
        notification = Notification.objects.create(
            producer=producer,
            event_id=f"e{number}",
            recipient=recipient,
            category=category,
            payload={},
            fingerprint="x",
        )
        entries.append(
            feed_entry_create(notification=notification, title=f"title {number}", body="", url="")
        )
    return entries


@pytest.fixture
def alice(demo_data):
    return Recipient.objects.create(user_id="alice", email="alice@example.com")


def test_feed_is_newest_first_and_the_cursor_is_stable_under_inserts(api, alice):
    make_entries(alice, 5)
    first = api.get("/v1/users/alice/feed?limit=2").json()
    assert [e["title"] for e in first["results"]] == ["title 4", "title 3"]
    make_entries(alice, 3, start=5)  # new entries arrive between pages
    second = api.get(f"/v1/users/alice/feed?limit=2&cursor={first['next_cursor']}").json()
    assert [e["title"] for e in second["results"]] == ["title 2", "title 1"]
    third = api.get(f"/v1/users/alice/feed?limit=2&cursor={second['next_cursor']}").json()
    assert [e["title"] for e in third["results"]] == ["title 0"]
    assert third["next_cursor"] is None
    assert set(first["results"][0]) == {
        "id",
        "notification_id",
        "category",
        "title",
        "body",
        "url",
        "created_at",
        "occurred_at",
        "read_at",
    }


def test_titles_keep_quotes_backslashes_braces_and_the_word_null(api, alice):
    producer, _ = Producer.objects.get_or_create(name="feed-tests")
    category = Category.objects.get(key="order.shipped")
    titles = ['say "hi"', "C:\\path\\to", "{a,b}", "NULL", " spaced ", "ünïcode ✓"]
    for number, title in enumerate(titles):
        notification = Notification.objects.create(
            producer=producer,
            event_id=f"t{number}",
            recipient=alice,
            category=category,
            payload={},
            fingerprint="x",
        )
        feed_entry_create(notification=notification, title=title, body=title, url="")
    shown = api.get("/v1/users/alice/feed?limit=20").json()["results"]
    assert sorted((e["title"], e["body"]) for e in shown) == sorted((t, t) for t in titles)


def test_bad_cursor_and_unknown_user_are_clear_errors(api, alice):
    response = api.get("/v1/users/alice/feed?cursor=%%%")
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "invalid_cursor"
    missing = api.get("/v1/users/nobody/feed")
    assert missing.status_code == 404
    assert missing.json()["error"]["code"] == "unknown_recipient"


@pytest.mark.django_db(transaction=True)
def test_marking_read_lowers_the_count_by_what_was_actually_marked(api, alice):
    entries = make_entries(alice, 4)
    assert api.get("/v1/users/alice/unread-count").json() == {"count": 4}
    ids = [entries[0].id, entries[1].id]
    assert api.post("/v1/users/alice/feed/read", {"ids": ids}, format="json").json() == {
        "marked": 2
    }
    # Marking the same entries again marks nothing and changes nothing.
    assert api.post("/v1/users/alice/feed/read", {"ids": ids}, format="json").json() == {
        "marked": 0
    }
    assert api.get("/v1/users/alice/unread-count").json() == {"count": 2}
    assert api.post("/v1/users/alice/feed/read", {"all": True}, format="json").json() == {
        "marked": 2
    }
    assert api.get("/v1/users/alice/unread-count").json() == {"count": 0}


@pytest.mark.django_db(transaction=True)
def test_marking_three_of_five_read_while_two_more_arrive_leaves_the_count_right(demo_data):
    alice = Recipient.objects.create(user_id="alice", email="alice@example.com")
    entries = make_entries(alice, 5)
    assert unread_count(recipient_id=alice.pk) == 5
    barrier = threading.Barrier(3)

    def mark() -> None:
        barrier.wait()
        feed_mark_read(recipient=alice, entry_ids=[e.id for e in entries[:3]])
        connection.close()

    def arrive(number: int) -> None:
        barrier.wait()
        make_entries(alice, 1, start=100 + number)
        connection.close()

    threads = [threading.Thread(target=mark)] + [
        threading.Thread(target=arrive, args=(n,)) for n in range(2)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert FeedEntry.objects.filter(recipient=alice, read_at__isnull=True).count() == 4
    assert unread_count(recipient_id=alice.pk) == 4


@pytest.mark.django_db(transaction=True)
def test_reconcile_repairs_a_drifted_counter_from_the_database(demo_data):
    from django_redis import get_redis_connection

    alice = Recipient.objects.create(user_id="alice", email="alice@example.com")
    make_entries(alice, 3)
    get_redis_connection("default").set(unread_key(alice.pk), 42)
    assert unread_reconcile(recipient_ids=[alice.pk]) == 1
    assert unread_count(recipient_id=alice.pk) == 3
    assert unread_reconcile(recipient_ids=[alice.pk]) == 0  # nothing left to fix


def test_with_redis_unreachable_the_feed_answers_and_the_count_says_unavailable(api, alice):
    make_entries(alice, 2)
    unreachable = {
        "default": {
            "BACKEND": "django_redis.cache.RedisCache",
            "LOCATION": "redis://127.0.0.1:1/0",  # nothing listens on port 1: refused at once
            "OPTIONS": {"SOCKET_CONNECT_TIMEOUT": 0.2, "SOCKET_TIMEOUT": 0.2},
        }
    }
    with override_settings(CACHES=unreachable):
        feed = api.get("/v1/users/alice/feed")
        assert feed.status_code == 200
        assert len(feed.json()["results"]) == 2
        assert api.get("/v1/users/alice/unread-count").json() == {
            "count": None,
            "available": False,
        }
        marked = api.post("/v1/users/alice/feed/read", {"all": True}, format="json")
        assert marked.json() == {"marked": 2}


def test_a_title_longer_than_its_column_is_cut_at_a_word_with_an_ellipsis(alice):
    from deliveries.models import Delivery, DeliveryStatus
    from deliveries.pipeline.routing import notification_route

    order_number = " ".join(["ORD-12345"] * 60)  # 599 characters: the title cannot hold it
    notification = Notification.objects.create(
        producer=Producer.objects.create(name="long-fields"),
        event_id="long",
        recipient=alice,
        category=Category.objects.get(key="order.shipped"),
        payload={"order_number": order_number, "delivery_date": "2026-12-01", "items_count": 1},
        channels=["inapp"],
        fingerprint="x",
    )
    notification_route(notification_id=str(notification.pk))

    inapp = Delivery.objects.get(notification=notification, channel="inapp")
    assert inapp.status == DeliveryStatus.DELIVERED
    title = alice.feed.get().title
    assert len(title) <= FeedEntry._meta.get_field("title").max_length
    assert title.startswith("Order ORD-12345 ORD-12345")
    # Whole words, then an ellipsis: the person sees it was cut, not a broken word.
    assert title.endswith("ORD-12345…")
