"""Teams that cannot hurt each other: least-privilege keys, guarded contact data, owned
categories with bounded settings, and erasure that cannot pre-empt a person."""

from __future__ import annotations

import importlib
import json
import uuid

import pytest
from django.contrib.admin.models import LogEntry
from django.core.management import call_command
from django.test import Client
from django.utils import timezone
from rest_framework.test import APIClient

from campaigns.erasure import person_erase
from deliveries.models import Delivery, DeliveryStatus
from deliveries.pipeline.routing import notifications_route
from notify.api_keys import api_key_issue
from notify.erasure import erasure_hash
from notify.guard import API_CHANGES_USER
from notify.key_checks import check_keys_holding_everything
from notify.models import (
    ApiKey,
    Category,
    ContactChange,
    Erasure,
    ErasureSuppression,
    ErasureVia,
    Producer,
    Recipient,
    RecipientGrant,
    Scope,
)
from notify.services import recipient_upsert
from tests.digest_data import comment_category, comment_event

ORDER = {"order_number": "A-1", "delivery_date": "2026-12-03", "items_count": 1}


def client_for(key: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")
    return client


def error_code(response) -> str:
    return response.json()["error"]["code"]


def order_event(user_id: str = "victim") -> dict:
    return {
        "event_id": str(uuid.uuid4()),
        "user_id": user_id,
        "category": "order.shipped",
        "payload": ORDER,
    }


@pytest.fixture
def victim(api):
    response = api.put("/v1/users/victim", {"email": "victim@example.com"}, format="json")
    assert response.status_code == 201, response.content
    return "victim"


# --- Least privilege by default --------------------------------------------------------


def test_a_default_key_sends_and_reads_its_own_status_and_nothing_else(demo_data, victim):
    team_a = client_for(api_key_issue(producer_name="team-a").key)
    assert ApiKey.objects.get(producer__name="team-a").scopes == ["notifications:send"]

    sent = team_a.post("/v1/notifications", order_event(), format="json")
    assert sent.status_code == 202, sent.content
    status_url = f"/v1/notifications/{sent.json()['notification_id']}/status"
    assert team_a.get(status_url).status_code == 200

    for refused in (
        team_a.put("/v1/users/victim", {"email": "evil@attacker.test"}, format="json"),
        team_a.post("/v1/users/victim/tokens"),
        team_a.delete("/v1/users/victim"),
        team_a.delete("/v1/users/never-registered"),
        team_a.patch(
            "/v1/categories/order.shipped", {"delays_if_unread": {"email": 60}}, format="json"
        ),
        team_a.get("/v1/users/victim/feed"),
        team_a.post(
            "/v1/campaigns",
            {"category": "promo.weekly", "payload": {}, "audience": {"all": True}},
            format="json",
        ),
    ):
        assert refused.status_code == 403, refused.content
        assert error_code(refused) == "missing_scope"
    assert Recipient.objects.get(user_id="victim").email == "victim@example.com"
    assert not Erasure.objects.exists()
    assert Category.objects.get(key="order.shipped").delays_if_unread == {}

    stream = Client(HTTP_AUTHORIZATION="Bearer " + api_key_issue(producer_name="team-a").key)
    assert stream.get("/v1/users/victim/stream").status_code == 403

    # Another team's default key does not learn that the notification exists.
    team_b = client_for(api_key_issue(producer_name="team-b").key)
    other = team_b.get(status_url)
    assert (other.status_code, error_code(other)) == (404, "not_found")
    assert team_b.delete(f"/v1/notifications/{sent.json()['notification_id']}").status_code == 404


def test_create_producer_without_scopes_makes_a_send_only_key(demo_data, capsys):
    call_command("create_producer", "new-team")
    key = capsys.readouterr().out.strip().splitlines()[-1]
    assert ApiKey.objects.get(producer__name="new-team").scopes == ["notifications:send"]
    refused = client_for(key).post("/v1/users/anyone/tokens")
    assert (refused.status_code, error_code(refused)) == (403, "missing_scope")


def test_keys_made_before_keep_exactly_what_they_could_do(demo_data):
    migration = importlib.import_module("notify.migrations.0018_producers_guarded")
    producer = Producer.objects.create(name="old")
    everything = ApiKey.objects.create(producer=producer, prefix="old1", key_hash="x", scopes=[])
    sender = ApiKey.objects.create(
        producer=producer, prefix="old2", key_hash="x", scopes=["notifications:send"]
    )
    reader = ApiKey.objects.create(
        producer=producer, prefix="old3", key_hash="x", scopes=["users:read"]
    )
    from django.apps import apps

    migration.keys_keep_what_they_could_do(apps, None)
    everything.refresh_from_db()
    sender.refresh_from_db()
    reader.refresh_from_db()
    assert set(everything.scopes) == set(Scope.values)  # all, campaigns included
    assert sender.scopes == ["campaigns:write", "notifications:send"]  # it could launch
    assert reader.scopes == ["users:read"]


def test_check_deploy_warns_about_keys_that_can_erase_or_change_categories_beside_all(demo_data):
    api_key_issue(producer_name="narrow", scopes=["users:erase"])
    wide = api_key_issue(producer_name="wide", scopes=list(Scope.values))
    warnings = check_keys_holding_everything()
    assert [w.id for w in warnings] == ["notify.W010"]
    assert wide.api_key.prefix in warnings[0].msg
    assert "users:erase" in warnings[0].msg and "categories:write" in warnings[0].msg


# --- Erasure of an id nobody registered -----------------------------------------------


def test_erasing_an_unregistered_id_is_recorded_and_never_holds_the_person_later(demo_data):
    privacy = client_for(api_key_issue(producer_name="privacy", scopes=["users:erase"]).key)
    assert privacy.delete("/v1/users/future-user").status_code == 204

    erasure = Erasure.objects.get()
    assert erasure.never_registered is True
    assert not ErasureSuppression.objects.exists()

    # The person signs up later: a login code reaches them.
    person, _ = recipient_upsert(user_id="future-user", fields={"email": "f@example.com"})
    assert person.erasure_hold_since is None


def test_erasing_a_registered_person_still_suppresses_them(demo_data, victim):
    erased = person_erase(user_id="victim", via=ErasureVia.API, requested_by="test")
    assert erased.found and erased.erasure.never_registered is False
    assert ErasureSuppression.objects.filter(kind="user_id").exists()
    # Asked again, the id is known as erased, not as never registered.
    again = person_erase(user_id="victim", via=ErasureVia.API, requested_by="test")
    assert again.erasure.never_registered is False


# --- Contact data ------------------------------------------------------------------------


def test_a_change_of_email_is_recorded_with_the_key_and_hashed_values(demo_data, victim):
    crm = api_key_issue(producer_name="crm", scopes=["recipients:write"])
    changed = client_for(crm.key).put(
        "/v1/users/victim", {"email": "new@example.com", "phone": "+15550001"}, format="json"
    )
    assert changed.status_code == 200, changed.content

    records = {c.field: c for c in ContactChange.objects.all()}
    assert set(records) == {"email", "phone"}
    email = records["email"]
    assert (email.producer.name, email.key_prefix) == ("crm", crm.api_key.prefix)
    assert email.old_hash == erasure_hash(kind="email", value="victim@example.com")
    assert email.new_hash == erasure_hash(kind="email", value="new@example.com")
    assert records["phone"].old_hash == ""
    # No address is kept in the record itself.
    assert "example.com" not in str(ContactChange.objects.values().get(field="email"))

    # The same values again change nothing and record nothing.
    client_for(crm.key).put("/v1/users/victim", {"email": "new@example.com"}, format="json")
    assert ContactChange.objects.count() == 2


def test_support_sees_contact_changes_on_the_recipient_page(demo_data, victim, admin_client):
    crm = api_key_issue(producer_name="crm", scopes=["recipients:write"])
    client_for(crm.key).put("/v1/users/victim", {"email": "new@example.com"}, format="json")
    person = Recipient.objects.get(user_id="victim")
    page = admin_client.get(f"/admin/notify/recipient/{person.pk}/change/")
    assert page.status_code == 200
    html = page.content.decode()
    assert "Contact changes" in html
    assert f"producer crm (key {crm.api_key.prefix})" in html


def test_owned_recipients_refuse_another_producers_key_until_granted(demo_data, settings):
    settings.NOTIFY_RECIPIENTS_OWNED = True
    scopes = ["recipients:write", "users:tokens", "users:read", "users:erase"]
    team_a = api_key_issue(producer_name="team-a", scopes=scopes)
    team_b = api_key_issue(producer_name="team-b", scopes=scopes)
    a, b = client_for(team_a.key), client_for(team_b.key)
    assert a.put("/v1/users/ann", {"email": "ann@example.com"}, format="json").status_code == 201
    assert Recipient.objects.get(user_id="ann").created_by == team_a.api_key.producer

    for refused in (
        b.put("/v1/users/ann", {"email": "evil@attacker.test"}, format="json"),
        b.post("/v1/users/ann/tokens"),
        b.get("/v1/users/ann/feed"),
        b.delete("/v1/users/ann"),
    ):
        assert refused.status_code == 403, refused.content
        assert error_code(refused) == "recipient_not_granted"
    stream = Client(HTTP_AUTHORIZATION=f"Bearer {team_b.key}").get("/v1/users/ann/stream")
    assert stream.status_code == 403
    assert Recipient.objects.get(user_id="ann").email == "ann@example.com"

    assert a.post("/v1/users/ann/tokens").status_code == 201
    RecipientGrant.objects.create(
        recipient=Recipient.objects.get(user_id="ann"), producer=team_b.api_key.producer
    )
    assert b.post("/v1/users/ann/tokens").status_code == 201


# --- Categories: owners and bounds --------------------------------------------------------


def test_only_the_owning_producers_keys_change_a_category_and_admin_history_names_the_key(
    demo_data,
):
    owner = api_key_issue(producer_name="orders", scopes=["categories:write"])
    other = api_key_issue(producer_name="marketing", scopes=["categories:write"])
    Category.objects.filter(key="order.shipped").update(owner=owner.api_key.producer)
    body = {"delays_if_unread": {"email": 900}}

    refused = client_for(other.key).patch("/v1/categories/order.shipped", body, format="json")
    assert (refused.status_code, error_code(refused)) == (403, "category_not_owned")
    unowned = client_for(owner.key).patch("/v1/categories/promo.weekly", body, format="json")
    assert (unowned.status_code, error_code(unowned)) == (403, "category_not_owned")
    assert Category.objects.get(key="order.shipped").delays_if_unread == {}

    changed = client_for(owner.key).patch("/v1/categories/order.shipped", body, format="json")
    assert changed.status_code == 200, changed.content
    category = Category.objects.get(key="order.shipped")
    entry = LogEntry.objects.get(object_id=str(category.pk))
    assert entry.user.username == API_CHANGES_USER and not entry.user.is_active
    assert f"producer orders (key {owner.api_key.prefix})" in entry.change_message
    assert "delays_if_unread" in entry.change_message


@pytest.mark.parametrize(
    "body",
    [
        {"delays_if_unread": {"email": 1_000_000_000}},
        {"delays_if_unread": {"email": 300_000_000_000}},
        {"delays_if_unread": {"email": 3e11}},
        {"digest_windows": {"email": 300_000_000_000}},
        {"digest_windows": {"email": 86_401}},
        {"delays_if_unread": {"email": 86_400}},  # the email deadline: it would expire
    ],
)
def test_a_delay_or_window_too_large_to_work_is_refused_and_changes_nothing(api, body):
    refused = api.patch("/v1/categories/order.shipped", body, format="json")
    assert refused.status_code in (400, 422), refused.content
    assert error_code(refused) in ("invalid", "invalid_settings")
    assert refused.json()["error"]["field"] == next(iter(body))
    category = Category.objects.get(key="order.shipped")
    assert (category.delays_if_unread, category.digest_windows) == ({}, {})


def test_a_delay_past_a_short_category_ttl_is_refused(api):
    Category.objects.filter(key="order.shipped").update(ttl_seconds=600)
    refused = api.patch(
        "/v1/categories/order.shipped", {"delays_if_unread": {"email": 900}}, format="json"
    )
    assert (refused.status_code, error_code(refused)) == (422, "invalid_settings")
    assert "at most 599 seconds" in refused.json()["error"]["message"]


def test_admin_refuses_a_window_longer_than_a_day(admin_client, demo_data):
    category = Category.objects.get(key="order.shipped")
    page = admin_client.get(f"/admin/notify/category/{category.pk}/change/")
    form = page.context["adminform"].form
    data = {
        name: form.initial.get(name) for name in form.fields if form.initial.get(name) is not None
    }
    for name in ("payload_schema", "sample_payloads", "default_channels", "delays_if_unread"):
        data[name] = json.dumps(form.initial[name])
    data["digest_windows"] = '{"email": 300000000000}'
    data["owner"] = ""
    answer = admin_client.post(f"/admin/notify/category/{category.pk}/change/", data)
    assert answer.status_code == 200  # the form again, with the error
    assert "at most 86400 seconds" in answer.content.decode()
    assert Category.objects.get(pk=category.pk).digest_windows == {}


@pytest.mark.django_db(transaction=False)
def test_a_category_value_that_cannot_be_computed_fails_only_its_own_notification(db):
    person = Recipient.objects.create(user_id="ann", email="ann@example.com", locale="en")
    good = comment_category("comment.posted")
    bad = comment_category("comment.broken")
    # Written by hand, past every validation: no date is 3e11 seconds away.
    Category.objects.filter(pk=bad.pk).update(delays_if_unread={"email": 300_000_000_000})
    bad.refresh_from_db()
    events = [
        comment_event(good, person, 1),
        comment_event(bad, person, 2),
        comment_event(good, person, 3),
    ]

    notifications_route(notification_ids=[str(e.pk) for e in events], now=timezone.now())

    emails = {d.notification_id: d for d in Delivery.objects.filter(channel="email").order_by("pk")}
    broken = emails[events[1].pk]
    assert (broken.status, broken.reason) == (DeliveryStatus.FAILED, "category_setting_invalid")
    assert broken.finished_at is not None
    for event in (events[0], events[2]):
        assert emails[event.pk].status == DeliveryStatus.QUEUED
    # Every notification of the batch was routed, the broken one's in-app entry too.
    assert person.feed.count() == 3


def test_a_method_an_operation_does_not_have_is_a_405_naming_the_ones_it_has(api):
    narrow = client_for(api_key_issue(producer_name="narrow").key)
    for client in (api, narrow):
        answer = client.post("/v1/categories/order.shipped", {}, format="json")
        assert answer.status_code == 405, answer.content
        assert set(answer["Allow"].replace(" ", "").split(",")) >= {"GET", "PATCH"}
        answer = client.get("/v1/users/victim")
        assert answer.status_code == 405, answer.content
        assert "PUT" in answer["Allow"] and "DELETE" in answer["Allow"]
