"""Erasure through each door (API scope, admin, command), and what happens when an erased
person is registered again: nothing is sent to them before fresh consent."""

from __future__ import annotations

from io import StringIO

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from rest_framework.test import APIClient

from deliveries.models import Delivery, Reason
from deliveries.pipeline.routing import notification_route
from notify.api_keys import api_key_issue
from notify.checks import check_erasure_key
from notify.models import Erasure, ErasureVia, Notification, Recipient
from notify.roles import privacy_group_ensure, support_group_ensure
from notify.tokens import user_token_issue
from preferences.erasure import consent_history_count
from preferences.models import ConsentRecord
from preferences.services import RequestOrigin, marketing_consent_grant

ORDER = {"order_number": "A-7", "delivery_date": "2026-12-03", "items_count": 1}


def client_for(key: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")
    return client


@pytest.fixture
def person(demo_data) -> Recipient:
    recipient = Recipient.objects.create(user_id="p-1", email="p1@example.org", phone="+1555")
    marketing_consent_grant(recipient=recipient, origin=RequestOrigin(source="signup"))
    return recipient


def send(api, user_id: str, event_id: str, category: str = "order.shipped") -> list[tuple]:
    """Accept an event and route it; the (channel, status, reason) of its deliveries."""
    payload = ORDER if category == "order.shipped" else {"code": "123456"}
    body = {"event_id": event_id, "user_id": user_id, "category": category, "payload": payload}
    answer = api.post("/v1/notifications", body, format="json")
    assert answer.status_code == 202, answer.json()
    notification_route(notification_id=answer.json()["notification_id"])
    deliveries = Delivery.objects.filter(notification_id=answer.json()["notification_id"])
    return sorted(deliveries.values_list("channel", "status", "reason"))


def test_erasing_needs_its_own_scope(person):
    writer = client_for(api_key_issue(producer_name="crm", scopes=["recipients:write"]).key)
    refused = writer.delete("/v1/users/p-1")
    assert (refused.status_code, refused.json()["error"]["code"]) == (403, "missing_scope")
    assert writer.put("/v1/users/p-1", {"locale": "de"}, format="json").status_code == 200

    own_token = client_for(user_token_issue(recipient_id=person.pk))
    assert own_token.delete("/v1/users/p-1").status_code == 403

    privacy = client_for(api_key_issue(producer_name="privacy", scopes=["users:erase"]).key)
    assert privacy.delete("/v1/users/p-1").status_code == 204
    assert not Recipient.objects.filter(user_id="p-1").exists()
    assert consent_history_count(user_id="p-1") == 1


def test_an_erased_person_registered_again_gets_nothing_until_fresh_consent(api, person):
    assert api.delete("/v1/users/p-1").status_code == 204

    assert api.put("/v1/users/p-1", {"email": "p1@example.org"}, format="json").status_code == 201
    held = Reason.ERASURE_HOLD
    assert send(api, "p-1", "after-1") == [
        ("email", "suppressed", held),
        ("fcm", "suppressed", held),
        ("inapp", "suppressed", held),
        ("webpush", "suppressed", held),
    ]
    # Not even a login code: the person has not come back on their own yet.
    assert send(api, "p-1", "after-2", "security.login_code") == [
        ("email", "suppressed", held),
        ("sms", "suppressed", held),
    ]

    consent = {"categories": {"order.shipped": {"email": True}}, "source": "signup"}
    assert api.put("/v1/users/p-1/preferences", consent, format="json").status_code == 200
    assert Recipient.objects.get(user_id="p-1").erasure_hold_since is None
    assert ("email", "queued", "") in send(api, "p-1", "after-3")
    # The old history is still apart from the new one.
    assert consent_history_count(user_id="p-1") == 1
    assert ConsentRecord.objects.filter(recipient__user_id="p-1").count() == 1


def test_a_new_user_id_with_an_erased_address_is_held_too(api, person):
    assert api.delete("/v1/users/p-1").status_code == 204
    assert api.put("/v1/users/p-2", {"email": "P1@Example.org"}, format="json").status_code == 201
    assert Recipient.objects.get(user_id="p-2").erasure_hold_since is not None
    assert api.put("/v1/users/p-3", {"email": "p3@example.org"}, format="json").status_code == 201
    assert Recipient.objects.get(user_id="p-3").erasure_hold_since is None


def test_deleting_a_recipient_in_admin_erases_them_and_keeps_their_consent(client, person):
    support = User.objects.create_user("support-2", password="pw", is_staff=True)
    support.groups.add(support_group_ensure())
    client.force_login(support)
    page = f"/admin/notify/recipient/{person.pk}/delete/"
    assert client.post(page, {"post": "yes"}).status_code == 403  # no erase permission

    officer = User.objects.create_user("privacy-officer", password="pw", is_staff=True)
    officer.groups.add(support_group_ensure(), privacy_group_ensure())
    client.force_login(officer)
    assert client.post(page, {"post": "yes"}).status_code == 302
    assert not Recipient.objects.filter(pk=person.pk).exists()
    assert consent_history_count(user_id="p-1") == 1
    [ledger] = Erasure.objects.all()
    assert (ledger.via, ledger.requested_by) == (ErasureVia.ADMIN, "admin privacy-officer")


def test_the_admin_action_erases_the_selected_people(client, person, api):
    send(api, "p-1", "before-1")
    officer = User.objects.create_superuser("privacy-officer", "po@notify.example", "pw")
    client.force_login(officer)
    answer = client.post(
        "/admin/notify/recipient/", {"action": "erase", "_selected_action": [person.pk]}
    )
    assert answer.status_code == 302
    assert not Notification.objects.exists() and not Delivery.objects.exists()
    assert consent_history_count(user_id="p-1") == 1


def test_the_command_erases_and_records_every_request(person):
    out = StringIO()
    call_command("erase_user", "p-1", "--by", "ticket-7", stdout=out)
    call_command("erase_user", "p-1", "--by", "ticket-7", stdout=out)
    assert out.getvalue().splitlines()[1].endswith("no recipient (recorded)")
    assert [(e.via, e.requested_by) for e in Erasure.objects.all()] == [
        (ErasureVia.COMMAND, "command: ticket-7")
    ] * 2
    assert consent_history_count(user_id="p-1") == 1


def test_deleting_a_recipient_outside_erasure_keeps_their_consent_records(person):
    Recipient.objects.filter(pk=person.pk).delete()
    assert ConsentRecord.objects.filter(recipient__isnull=True).count() == 1


def test_reapplying_the_ledger_erases_people_a_restored_backup_brought_back(person, client):
    erased_pk = person.pk
    call_command("erase_user", "p-1", "--by", "ticket-8", stdout=StringIO())
    # A backup from before the erasure is restored: the person is back, same id.
    Recipient.objects.create(pk=erased_pk, user_id="p-1", email="p1@example.org")
    Recipient.objects.create(user_id="p-9", email="p9@example.org")
    out = StringIO()
    call_command("erase_user", "--reapply-ledger", "--by", "restore", stdout=out)
    assert "1 restored recipients erased again" in out.getvalue()
    assert list(
        Recipient.objects.filter(user_id__startswith="p-").values_list("user_id", flat=True)
    ) == ["p-9"]

    # Support finds the ledger rows by the user id they were asked about.
    client.force_login(User.objects.create_superuser("po", "po@notify.example", "pw"))
    page = client.get("/admin/notify/erasure/", {"q": "p-1"}).content.decode()
    assert page.count("command: ticket-8") == 1 and page.count("command: restore") == 1


def test_a_deployment_on_the_built_in_erasure_key_fails_the_deploy_check(settings):
    settings.DEBUG = False
    settings.NOTIFY_ERASURE_KEY = settings.NOTIFY_ERASURE_KEY_DEFAULT
    assert [error.id for error in check_erasure_key()] == ["notify.E002"]
    settings.NOTIFY_ERASURE_KEY = "a-long-random-value-set-once-0123456789-abcdefghijkl"
    assert check_erasure_key() == []
