"""Erasure on request: afterwards neither PostgreSQL, Redis nor the archive of past months
holds the person's email, phone, user id, tokens or payloads; their consent history is
still there under a keyed hash; and an event for them is refused."""

from __future__ import annotations

import subprocess

import pytest
import redis
from django.conf import settings
from django.contrib.admin.models import CHANGE, LogEntry
from django.contrib.auth.models import User
from django.db import connection
from django.utils import timezone

from campaigns.models import AudienceKind, Campaign, CampaignMember
from deliveries.channels.email import kept_session_close
from deliveries.models import AddressSuppression, Delivery, DeliveryAttempt, Device
from deliveries.pipeline.attempt import delivery_attempt
from deliveries.pipeline.live import (
    device_live_mark,
    feed_entries_mark_seen_by,
    feed_seen_key,
    live_key,
)
from deliveries.pipeline.routing import notification_route
from flow.fairness import push_slots_key
from history.partitions import month_add, month_of
from history.retention import retention_run
from notify.models import Category, Erasure, ErasureVia, Notification, Producer, Recipient
from notify.unread import unread_key
from preferences.erasure import consent_history_count
from preferences.models import ConsentRecord
from tests.conftest import purge_queues
from tests.deliveries.push.test_devices_api import webpush_body
from tests.history.factories import archived_text, rows_move_to_month

USER_ID = "erase-me-8c1d"
EMAIL = "Erase.Me@example.org"
PHONE = "+15550104242"
ENDPOINT = "https://push.example/sub/erase-endpoint-91"
FCM_TOKEN = "fcm-token-erase-77f0"
ORDER_NUMBER = "ORD-ERASE-5150"
PERSONAL = [USER_ID, EMAIL.lower(), EMAIL, PHONE, ENDPOINT, FCM_TOKEN, ORDER_NUMBER]


@pytest.fixture
def channels(transactional_db, smtp, broker, settings, session_worker_paused):
    """Every channel on; in-process email sends go to the SMTP peer; queued sends are
    published to the test vhost (no worker takes them: the session worker, if running,
    is paused) and purged afterwards."""
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST, settings.EMAIL_PORT = "127.0.0.1", smtp.port
    settings.NOTIFY_CHANNELS_ENABLED = ["inapp", "email", "webpush", "fcm", "sms"]
    yield smtp
    kept_session_close()
    purge_queues(broker)


def pg_dump_text() -> str:
    """A full plain-text dump of the test database, as an operator would take it."""
    db = connection.settings_dict
    command = [
        "pg_dump",
        "-h",
        db["HOST"] or "127.0.0.1",
        "-p",
        str(db["PORT"] or 5432),
        "-U",
        db["USER"] or "postgres",
        "--no-owner",
        db["NAME"],
    ]
    env = {"PGPASSWORD": db["PASSWORD"] or ""}
    done = subprocess.run(command, capture_output=True, check=True, env=env, timeout=120)
    return done.stdout.decode()


def redis_text() -> str:
    """Every key of the test Redis database and every value in it, as text."""
    client = redis.Redis.from_url(settings.REDIS_URL)
    parts: list[bytes] = []
    for key in client.scan_iter():
        parts.append(key)
        kind = client.type(key)
        if kind == b"string":
            parts.append(client.get(key) or b"")
        elif kind == b"zset":
            parts.extend(client.zrange(key, 0, -1))
        elif kind == b"hash":
            for field, value in client.hgetall(key).items():
                parts.extend((field, value))
        elif kind == b"list":
            parts.extend(client.lrange(key, 0, -1))
        elif kind == b"set":
            parts.extend(client.smembers(key))
    return b"\n".join(parts).decode("utf-8", "replace")


def found(text: str) -> list[str]:
    return [value for value in PERSONAL if value in text]


def a_person_with_history(api, smtp) -> Recipient:
    """Contact data, consent history, two devices (one live), two notifications on five
    channels (one email hard-bounced), a feed with its unread count, held push slots, a
    campaign audience naming them and an admin log entry about them."""
    assert (
        api.put(f"/v1/users/{USER_ID}", {"email": EMAIL, "phone": PHONE}, format="json").status_code
        == 201
    )
    consent = {"categories": {"promo.weekly": {"email": True, "inapp": True}}, "source": "signup"}
    api.put(f"/v1/users/{USER_ID}/preferences", consent, format="json", HTTP_USER_AGENT="UA-1")
    web = api.post(f"/v1/users/{USER_ID}/devices", webpush_body(ENDPOINT), format="json")
    phone = {"kind": "fcm", "token": FCM_TOKEN, "platform": "android"}
    assert api.post(f"/v1/users/{USER_ID}/devices", phone, format="json").status_code == 201
    device_live_mark(device_id=web.json()["device_id"], connection_id="conn-1")
    recipient = Recipient.objects.get(user_id=USER_ID)

    smtp.handler.rcpt_answers.append(f"550 5.1.1 <{EMAIL.lower()}>: no such user")
    for n in (1, 2):
        event = {
            "event_id": f"erase-{n}",
            "user_id": USER_ID,
            "category": "order.shipped",
            "payload": {
                "order_number": ORDER_NUMBER,
                "delivery_date": "2026-12-03",
                "items_count": n,
            },
            "channels": ["inapp", "email", "webpush", "fcm", "sms"],
        }
        accepted = api.post("/v1/notifications", event, format="json")
        assert accepted.status_code == 202, accepted.json()
        notification_route(notification_id=accepted.json()["notification_id"])
    bounced = Delivery.objects.filter(channel="email", notification__event_id="erase-1").get()
    delivery_attempt(delivery_id=bounced.pk)

    Campaign.objects.create(
        name="winter",
        category=Category.objects.get(key="promo.weekly"),
        payload={},
        audience_kind=AudienceKind.USER_IDS,
        audience_spec={"user_ids": [USER_ID, "other-1"]},
        producer=Producer.objects.get(name="shop"),
    )
    uploaded = Campaign.objects.create(
        name="spring",
        category=Category.objects.get(key="promo.weekly"),
        payload={},
        audience_kind=AudienceKind.UPLOAD,
        producer=Producer.objects.get(name="shop"),
    )
    CampaignMember.objects.bulk_create(
        [CampaignMember(campaign=uploaded, user_id=u) for u in (USER_ID, "other-2")]
    )
    staff = User.objects.create_superuser("support-1", "s1@notify.example", "pw")
    LogEntry.objects.log_actions(
        staff.pk,
        [recipient],
        CHANGE,
        change_message=f"changed email to {EMAIL}",
        single_object=True,
    )
    return recipient


def test_after_erasure_no_dump_or_archive_holds_the_person_and_their_consent_is_countable(
    api, channels, settings, tmp_path
):
    recipient = a_person_with_history(api, channels)
    browser = Device.objects.get(recipient=recipient, kind="webpush")
    # Their first notification is from five months ago, and retention archived its month.
    settings.NOTIFY_ARCHIVE_URL, settings.NOTIFY_RETENTION_DAYS = str(tmp_path), 90
    archived = month_add(month_of(timezone.now()), -5)
    first = Notification.objects.get(event_id="erase-1")
    rows_move_to_month(archived, [first.pk])
    assert list(retention_run().archived) == [f"{archived:%Y-%m}"]
    assert not Notification.objects.filter(pk=first.pk).exists()
    # What there is to erase: the dumps and the archive scan can fail this test.
    assert DeliveryAttempt.objects.filter(delivery__notification__recipient=recipient).exists()
    assert AddressSuppression.objects.filter(address=EMAIL.lower()).exists()
    assert Delivery.objects.filter(notification__recipient=recipient).count() == 5
    consents = ConsentRecord.objects.filter(recipient=recipient).count()
    assert consents == 2
    assert set(found(pg_dump_text())) == set(PERSONAL)
    raw, decoded = archived_text(tmp_path)
    assert {v for v in PERSONAL if v in decoded} >= {EMAIL.lower(), PHONE, ORDER_NUMBER}
    client = redis.Redis.from_url(settings.REDIS_URL)
    # What the live stream showed them (read by a delay if unread).
    entry = recipient.feed.order_by("pk").last()
    feed_entries_mark_seen_by(recipient_id=recipient.pk, entry_ids=[entry.pk])
    per_person = [
        unread_key(recipient.pk),
        push_slots_key(recipient.pk),
        live_key(browser.pk),
        feed_seen_key(recipient.pk),
    ]
    assert client.exists(*per_person) == 4

    assert api.delete(f"/v1/users/{USER_ID}").status_code == 204

    assert found(pg_dump_text()) == []
    assert found(redis_text()) == []
    raw, decoded = archived_text(tmp_path)
    assert found(decoded) == [] and [v for v in PERSONAL if v.encode() in raw] == []
    assert client.exists(*per_person) == 0
    assert consent_history_count(user_id=USER_ID) == consents
    kept = ConsentRecord.objects.filter(recipient__isnull=True)
    assert {(c.granted, c.source, c.ip_address, c.user_agent) for c in kept} == {
        (True, "signup", None, "")
    }
    assert Campaign.objects.get(name="winter").audience_spec == {"user_ids": ["other-1"]}
    assert list(CampaignMember.objects.values_list("user_id", flat=True)) == ["other-2"]
    [ledger] = Erasure.objects.all()
    assert (ledger.via, ledger.requested_by, ledger.recipient_pk) == (
        ErasureVia.API,
        f"producer shop (key {api_key_prefix(api)})",
        recipient.pk,
    )
    assert ledger.removed["deliveries"] == 5 and ledger.removed["devices"] == 2

    # An event for the erased user id is refused: nothing of it is stored.
    event = {
        "event_id": "erase-3",
        "user_id": USER_ID,
        "category": "order.shipped",
        "payload": {"order_number": "ORD-AFTER", "delivery_date": "2026-12-04", "items_count": 1},
    }
    refused = api.post("/v1/notifications", event, format="json")
    assert (refused.status_code, refused.json()["error"]["code"]) == (422, "unknown_recipient")
    assert "ORD-AFTER" not in pg_dump_text()


def test_erasing_again_changes_nothing_and_is_recorded_again(api, channels):
    a_person_with_history(api, channels)
    assert api.delete(f"/v1/users/{USER_ID}").status_code == 204
    dump = pg_dump_text()
    assert api.delete(f"/v1/users/{USER_ID}").status_code == 204
    assert found(pg_dump_text()) == found(dump) == []
    assert [e.recipient_pk is None for e in Erasure.objects.order_by("pk")] == [False, True]
    assert consent_history_count(user_id=USER_ID) == 2


def api_key_prefix(api) -> str:
    return api._credentials["HTTP_AUTHORIZATION"].split("_")[1]
