"""Digests and delays if unread, called directly: what the route files, what a close
decides (with the gate again: consent, quiet hours), erasure, campaigns, bad input."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.core.exceptions import ValidationError
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from deliveries.erasure import deliveries_erase
from deliveries.models import Delivery, DeliveryStatus, DigestItem, DigestWindow
from deliveries.pipeline.claim import deliveries_load
from deliveries.pipeline.digest_close import digests_close
from deliveries.pipeline.digests import digest_contexts_attach
from deliveries.pipeline.release import deferred_release
from deliveries.pipeline.routing import notification_route, notifications_route
from notify.feed import feed_mark_read
from notify.models import Category, Recipient
from preferences.services import RequestOrigin, marketing_consent_grant, preferences_update
from templates_admin.models import Template
from templates_admin.services import (
    TemplateInvalid,
    template_version_draft,
    template_version_publish,
)
from tests.digest_data import DIGEST_EMAIL, ONE_EMAIL, comment_category, comment_event
from webhooks.events import subscription_cache_clear

pytestmark = pytest.mark.django_db


@pytest.fixture
def person():
    return Recipient.objects.create(user_id="ann", email="ann@example.com", locale="en")


def email_rows(*notifications) -> list[Delivery]:
    ids = [n.pk for n in notifications]
    return list(Delivery.objects.filter(notification_id__in=ids, channel="email").order_by("id"))


def test_a_windows_events_become_one_email_that_lists_them_all(person):
    comments = comment_category(digest_windows={"email": 60})
    events = [comment_event(comments, person, n) for n in range(1, 4)]
    now = timezone.now()
    notifications_route(notification_ids=[str(e.pk) for e in events[:2]], now=now)
    notification_route(notification_id=str(events[2].pk), now=now)  # a later batch

    assert {d.status for d in email_rows(*events)} == {DeliveryStatus.DIGESTING}
    window = DigestWindow.objects.get()
    assert (window.state, window.items_count, window.channel) == ("open", 3, "email")
    assert window.closes_at == now + timedelta(seconds=60)
    # In-app stays one entry per event.
    assert person.feed.count() == 3

    assert digests_close(now=now + timedelta(seconds=59)) == 0  # not due yet
    assert digests_close(now=now + timedelta(seconds=61)) == 1
    assert digests_close(now=now + timedelta(seconds=62)) == 0  # closed once

    first, second, last = email_rows(*events)
    assert (last.status, last.enqueued_at is not None) == (DeliveryStatus.QUEUED, True)
    for item in (first, second):
        assert (item.status, item.reason, item.finished_at is not None) == (
            "digested",
            "in_digest",
            True,
        )
    window.refresh_from_db()
    assert (window.state, window.carrier_id) == ("sent", last.pk)

    loaded = deliveries_load(delivery_ids=[last.pk])[last.pk]
    digest_contexts_attach([loaded.delivery])
    digest = loaded.delivery.digest_context
    assert digest["count"] == 3
    assert [e["payload"]["comment_id"] for e in digest["events"]] == ["c1", "c2", "c3"]
    assert digest["first_at"] <= digest["last_at"]


def test_a_digest_key_splits_windows_and_a_new_window_opens_after_a_close(person):
    comments = comment_category(digest_windows={"email": 60}, digest_key="thread_id")
    now = timezone.now()
    a = comment_event(comments, person, 1, thread="a")
    b = comment_event(comments, person, 2, thread="b")
    notifications_route(notification_ids=[str(a.pk), str(b.pk)], now=now)
    assert sorted(DigestWindow.objects.values_list("digest_key", flat=True)) == ["a", "b"]
    digests_close(now=now + timedelta(seconds=61))
    later = comment_event(comments, person, 3, thread="a")
    notification_route(notification_id=str(later.pk), now=now + timedelta(seconds=70))
    assert DigestWindow.objects.filter(state="open").get().items.get().notification_id == later.pk


def test_consent_withdrawn_while_a_window_is_open_drops_its_items_with_the_reason(person):
    comments = comment_category(digest_windows={"email": 60})
    events = [comment_event(comments, person, n) for n in range(1, 3)]
    now = timezone.now()
    notifications_route(notification_ids=[str(e.pk) for e in events], now=now)
    preferences_update(
        recipient=person,
        cells={"comment.posted": {"email": False}},
        origin=RequestOrigin(source="api"),
    )
    digests_close(now=now + timedelta(seconds=61))
    assert {(d.status, d.reason) for d in email_rows(*events)} == {("suppressed", "opted_out")}
    assert DigestWindow.objects.get().state == "dropped"


def _zone_where_it_is(now: datetime, *, hour: int) -> str:
    """An Etc/GMT zone whose local time is hour:xx now."""
    offset = (hour - now.astimezone(UTC).hour + 12) % 24 - 12  # within -12..+11
    return "UTC" if offset == 0 else f"Etc/GMT{'-' if offset > 0 else '+'}{abs(offset)}"


def _zone_where_it_is_late_evening(now: datetime) -> str:
    """An Etc/GMT zone whose local time is 23:xx now (inside default quiet hours)."""
    return _zone_where_it_is(now, hour=23)


def test_quiet_hours_defer_a_closing_digest_until_they_end(person):
    news = comment_category(
        "news.comment", digest_windows={"email": 60}, marketing=True, queue="low"
    )
    now = timezone.now()
    person.timezone = _zone_where_it_is_late_evening(now)
    person.save()
    marketing_consent_grant(recipient=person, origin=RequestOrigin(source="signup"))
    events = [comment_event(news, person, n) for n in range(1, 3)]
    # Routed in the day (quiet hours do not hold an event from its window) ...
    day = now - timedelta(hours=12)
    notifications_route(notification_ids=[str(e.pk) for e in events], now=day)
    assert {d.status for d in email_rows(*events)} == {"digesting"}
    # ... and closing at night: the digest waits for the morning, it is not dropped.
    digests_close(now=now)
    window = DigestWindow.objects.get()
    assert window.state == "deferred"
    first, last = sorted(email_rows(*events), key=lambda d: d.pk == window.carrier_id)
    assert (first.status, last.status, last.reason) == ("digested", "deferred", "quiet_hours")
    morning = last.next_attempt_at
    assert morning > now
    assert deferred_release(now=morning - timedelta(minutes=1)) == 0
    assert deferred_release(now=morning + timedelta(seconds=1)) == 1
    last.refresh_from_db()
    assert last.status == "queued"


def test_an_event_cancelled_while_its_window_is_open_is_not_in_the_digest(person):
    from deliveries.pipeline.cancel import notification_cancel

    comments = comment_category(digest_windows={"email": 60})
    events = [comment_event(comments, person, n) for n in range(1, 4)]
    now = timezone.now() - timedelta(seconds=61)
    for event in events:
        notification_route(notification_id=str(event.pk), now=now)
    notification_cancel(producer=events[2].producer, notification_id=events[2].pk)
    digests_close()
    window = DigestWindow.objects.get()
    carrier = Delivery.objects.get(pk=window.carrier_id)
    assert (carrier.notification_id, carrier.status) == (events[1].pk, "queued")
    assert email_rows(events[2])[0].status == "cancelled"
    loaded = deliveries_load(delivery_ids=[carrier.pk])[carrier.pk]
    digest_contexts_attach([loaded.delivery])
    listed = [e["payload"]["comment_id"] for e in loaded.delivery.digest_context["events"]]
    assert (listed, loaded.delivery.digest_context["count"]) == (["c1", "c2"], 2)


def test_the_daily_cap_counts_a_marketing_digest_once(person, settings):
    settings.NOTIFY_MARKETING_DAILY_CAP = 2
    news = comment_category(
        "news.digest", digest_windows={"email": 60}, marketing=True, queue="low"
    )
    news.default_channels = ["email"]
    news.save()
    now = timezone.now()
    person.timezone = _zone_where_it_is(now, hour=12)
    person.save()
    marketing_consent_grant(recipient=person, origin=RequestOrigin(source="signup"))
    events = [comment_event(news, person, n) for n in range(1, 6)]
    notifications_route(notification_ids=[str(e.pk) for e in events], now=now)
    # Five events, a cap of two: none is refused at route, they wait in the window ...
    assert {d.status for d in email_rows(*events)} == {"digesting"}
    digests_close(now=now + timedelta(seconds=61))
    assert DigestWindow.objects.get().state == "sent"  # ... and the digest is counted once
    later = comment_event(news, person, 6)
    notification_route(notification_id=str(later.pk), now=now + timedelta(seconds=70))
    digests_close(now=now + timedelta(seconds=131))
    assert DigestWindow.objects.filter(state="sent").count() == 2  # the second fits the cap
    third = comment_event(news, person, 7)
    notification_route(notification_id=str(third.pk), now=now + timedelta(seconds=140))
    digests_close(now=now + timedelta(seconds=201))
    assert (email_rows(third)[0].status, email_rows(third)[0].reason) == (
        "suppressed",
        "frequency_cap",
    )


def test_erasure_removes_open_windows(person):
    comments = comment_category(digest_windows={"email": 60})
    event = comment_event(comments, person, 1)
    notification_route(notification_id=str(event.pk))
    assert deliveries_erase(recipient=person)["digest_windows"] == 1
    assert not DigestWindow.objects.exists() and not DigestItem.objects.exists()


def test_a_campaign_never_opens_a_digest(person):
    comments = comment_category(digest_windows={"email": 60})
    event = comment_event(comments, person, 1, event_id=f"campaign:7:{person.user_id}")
    notification_route(notification_id=str(event.pk))
    assert email_rows(event)[0].status == "queued"
    assert not DigestWindow.objects.exists()


def test_a_category_may_digest_in_app_too_one_entry_per_window(person):
    from deliveries.pipeline.attempt import deliveries_attempt

    comments = comment_category(digest_windows={"inapp": 60})
    comments.full_clean()  # (an admin save takes it)
    template = Template.objects.get(category=comments, channel="inapp")
    digest_inapp = {
        "title": "{{ digest.count }} new comments",
        "body": "{% for event in digest.events %}[{{ event.payload.comment_id }}]{% endfor %}",
        "url": "",
    }
    template_version_publish(version=template_version_draft(template=template, fields=digest_inapp))
    events = [comment_event(comments, person, n) for n in range(1, 4)]
    routed_at = timezone.now() - timedelta(seconds=61)  # so the window is due now
    notifications_route(notification_ids=[str(e.pk) for e in events], now=routed_at)
    assert person.feed.count() == 0  # (email is not digested: it went at once)
    assert {d.status for d in email_rows(*events)} == {"queued"}

    assert digests_close() == 1
    carrier = Delivery.objects.get(channel="inapp", status="queued")
    deliveries_attempt(delivery_ids=[carrier.pk])
    entry = person.feed.get()
    assert (entry.notification_id, entry.title) == (events[-1].pk, "3 new comments")
    assert entry.body == "[c1][c2][c3]"
    others = Delivery.objects.filter(channel="inapp").exclude(pk=carrier.pk)
    assert {(d.status, d.reason) for d in others} == {("digested", "in_digest")}


def test_delay_if_unread_skips_a_read_entry_and_sends_an_unread_one(person):
    comments = comment_category(delays_if_unread={"email": 10})
    read, unread = comment_event(comments, person, 1), comment_event(comments, person, 2)
    now = timezone.now()
    notifications_route(notification_ids=[str(read.pk), str(unread.pk)], now=now)
    rows = email_rows(read, unread)
    assert {(d.status, d.reason) for d in rows} == {("deferred", "delayed_if_unread")}
    entry = person.feed.get(notification=read)
    feed_mark_read(recipient=person, entry_ids=[entry.pk])

    assert deferred_release(now=now + timedelta(seconds=9)) == 0
    assert deferred_release(now=now + timedelta(seconds=11)) == 1
    skipped, sent = email_rows(read)[0], email_rows(unread)[0]
    assert (skipped.status, skipped.reason) == ("skipped_read", "read_in_app")
    assert sent.status == "queued"


@pytest.mark.parametrize(
    ("fields", "field", "says"),
    [
        ({"digest_windows": {"email": 0}}, "digest_windows", "above 0"),
        ({"digest_windows": {"email": -30}}, "digest_windows", "above 0"),
        ({"digest_windows": {"email": "soon"}}, "digest_windows", "above 0"),
        ({"delays_if_unread": {"inapp": 60}}, "delays_if_unread", "applies to"),
        (
            {"digest_windows": {"inapp": 60}, "delays_if_unread": {"email": 60}},
            "delays_if_unread",
            "in-app digested",
        ),
        ({"digest_windows": {"email": 60}, "mandatory": True}, "digest_windows", "mandatory"),
        ({"delays_if_unread": {"email": 0}}, "delays_if_unread", "above 0"),
        ({"delays_if_unread": {"sms": 60}, "mandatory": True}, "delays_if_unread", "mandatory"),
        (
            {"digest_windows": {"email": 60}, "delays_if_unread": {"email": 60}},
            "delays_if_unread",
            "not both",
        ),
    ],
)
def test_bad_digest_or_delay_settings_are_refused_with_a_reason(fields, field, says):
    category = Category(key="bad", **fields)
    with pytest.raises(ValidationError) as refused:
        category.full_clean()
    assert says in " ".join(refused.value.message_dict[field])


def test_digest_variables_are_refused_on_a_channel_the_category_does_not_digest():
    comments = comment_category(digest_windows={"webpush": 60})
    template = Template.objects.get(category=comments, channel="email")
    with pytest.raises(TemplateInvalid) as refused:
        template_version_draft(template=template, fields=DIGEST_EMAIL)
    assert "exists only on a channel this category digests" in str(refused.value.problems)
    assert template_version_draft(template=template, fields=ONE_EMAIL).number == 2


def test_closing_costs_the_same_statements_for_many_events_as_for_few():
    comments = comment_category(digest_windows={"email": 60})
    people = [
        Recipient.objects.create(user_id=f"p{n}", email=f"p{n}@example.com") for n in range(20)
    ]
    now = timezone.now()

    def close_cost(events_each: int, start: int) -> int:
        events = [comment_event(comments, p, start + n) for p in people for n in range(events_each)]
        notifications_route(notification_ids=[str(e.pk) for e in events], now=now)
        with CaptureQueriesContext(connection) as queries:
            assert digests_close(now=now + timedelta(seconds=61)) == len(people)
        return len(queries)

    few, many = close_cost(1, 0), close_cost(10, 100)
    assert many == few <= 12


def _stage_statements(category, people: list[Recipient], events_each: int) -> dict[str, int]:
    """Statements of each stage with every event in one batch: the route (one call), the
    close (one call; digest path only) and the send of every email then queued (one
    call, in one round: rounds follow the provider's speed, not the batch's size)."""
    from deliveries.pipeline.attempt import deliveries_attempt
    from tests.deliveries.pipeline.test_costs import StatementLog

    events = [
        comment_event(category, p, 1000 * n + i)
        for i, p in enumerate(people)
        for n in range(events_each)
    ]
    routed_at = timezone.now() - timedelta(seconds=61)  # so the windows are due now
    counts: dict[str, int] = {}

    def counted(stage: str, run) -> None:
        log = StatementLog()
        with connection.execute_wrapper(log):
            run()
        counts[stage] = len(log.statements)

    ids = [str(e.pk) for e in events]
    counted("route", lambda: notifications_route(notification_ids=ids, now=routed_at))
    if category.digest_windows:
        counted("close", lambda: digests_close())
    queued = list(  # (the worker has these ids in its send message)
        Delivery.objects.filter(
            channel="email", status="queued", notification__category=category
        ).values_list("pk", flat=True)
    )
    counted("send", lambda: deliveries_attempt(delivery_ids=queued))
    assert Delivery.objects.filter(channel="email", status="queued").count() == 0
    return counts


def test_the_digest_path_costs_no_more_statements_per_event_than_the_plain_one(
    settings, smtp, clean_breakers
):
    """At the scale of 1,000 people x 10 events, set-based: each stage costs the same
    statements per batch whatever the batch holds (asserted at two sizes), so the whole
    run's count is batches x those, for either path, and the digest path's per event is
    compared at that scale. (Running 10,000 events through both paths takes minutes;
    the counts it would give are these.)"""
    settings.NOTIFY_CHANNELS_ENABLED = ["inapp", "email"]
    settings.NOTIFY_BATCH_ROUND_START = 10_000
    # Read once (by the warm-up below), not again when its time runs out mid-test.
    settings.NOTIFY_WEBHOOK_SUBSCRIPTION_CACHE_SECONDS = 3600
    subscription_cache_clear()
    # The real SMTP backend (the test runner swaps in an in-memory one) and our peer.
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST, settings.EMAIL_PORT = "127.0.0.1", smtp.port
    people = [
        Recipient.objects.create(user_id=f"s{n}", email=f"s{n}@example.com", locale="en")
        for n in range(27)
    ]
    warm, small, large = people[:2], people[2:7], people[7:]
    measured = {}
    for n, (key, digest_windows) in enumerate((("plain", {}), ("digest", {"email": 60}))):
        category = comment_category(f"comment.{key}", digest_windows=digest_windows)
        _stage_statements(category, warm[n : n + 1], 1)  # (caches filled)
        few = _stage_statements(category, small, 2)  # 10 events, 5 windows
        many = _stage_statements(category, large, 5)  # 100 events, 20 windows
        assert few == many, (key, few, many)  # per batch, not per event nor window
        measured[key] = many
    assert len(smtp.received) == 1 + 110 + 1 + 25  # every plain event's email, one per window
    plain, digest = measured["plain"], measured["digest"]
    # 1,000 people x 10 events, in batches of NOTIFY_BATCH_SIZE (route and send) and of
    # NOTIFY_DIGEST_CLOSE_BATCH windows (close); one digest per person.
    people_n, events_n = 1000, 10_000
    batches = lambda n, size: -(-n // size)  # noqa: E731
    size, close_size = settings.NOTIFY_BATCH_SIZE, settings.NOTIFY_DIGEST_CLOSE_BATCH
    plain_total = batches(events_n, size) * (plain["route"] + plain["send"])
    digest_total = (
        batches(events_n, size) * digest["route"]
        + batches(people_n, close_size) * digest["close"]
        + batches(people_n, size) * digest["send"]
    )
    print(
        f"per event at 1,000 x 10: plain {plain_total / events_n:.3f}, "
        f"digest {digest_total / events_n:.3f} ({plain=}, {digest=})"
    )
    assert digest_total <= plain_total, (digest_total, plain_total)
