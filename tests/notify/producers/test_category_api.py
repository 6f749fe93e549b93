"""The category API: read a category's settings, change its digest settings through the
same validation as the admin, and see the change in the next route."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from deliveries.models import Delivery, DeliveryStatus, DigestWindow
from deliveries.pipeline.routing import notification_route
from notify.api_keys import api_key_issue
from notify.models import Category, Producer, Recipient, Scope
from notify.tokens import user_token_issue
from tests.digest_data import COMMENT_SAMPLES, COMMENT_SCHEMA, comment_category, comment_event
from tests.notify.producers.test_api_key_scopes import assert_missing_scope, client_for

DIGEST_FIELDS = ("digest_windows", "digest_key", "delays_if_unread")


def shop() -> Producer:
    """The `api` fixture's producer, which owns the categories these tests change."""
    return Producer.objects.get(name="shop")


def digest_settings(key: str) -> tuple:
    category = Category.objects.get(key=key)
    return tuple(getattr(category, name) for name in DIGEST_FIELDS)


def test_reads_every_category_with_its_digest_settings(api):
    comment_category(digest_windows={"email": 600}, digest_key="thread_id", owner=shop())

    listed = api.get("/v1/categories")
    assert listed.status_code == 200, listed.content
    by_key = {c["key"]: c for c in listed.json()["results"]}
    assert {"comment.posted", "order.shipped"} <= set(by_key)  # the demo's too
    one = api.get("/v1/categories/comment.posted")
    assert one.status_code == 200, one.content
    assert one.json() == by_key["comment.posted"]
    assert one.json() == {
        "key": "comment.posted",
        "description": "",
        "labels": {},
        "queue": "medium",
        "mandatory": False,
        "marketing": False,
        "default_channels": ["inapp", "email"],
        "fallback_channel": "",
        "ttl_seconds": None,
        "digest_windows": {"email": 600},
        "digest_key": "thread_id",
        "delays_if_unread": {},
    }


def test_a_30_minute_email_window_set_through_the_api_is_the_admins_and_the_routes(api):
    comment_category(owner=shop())
    ann = Recipient.objects.create(user_id="ann", email="ann@example.com", locale="en")
    before = comment_event(Category.objects.get(key="comment.posted"), ann, 1)
    notification_route(notification_id=str(before.pk), now=timezone.now())
    assert Delivery.objects.get(notification=before, channel="email").status == "queued"

    changed = api.patch(
        "/v1/categories/comment.posted",
        {"digest_windows": {"email": 1800}, "digest_key": "thread_id"},
        format="json",
    )
    assert changed.status_code == 200, changed.content
    assert changed.json()["digest_windows"] == {"email": 1800}
    # What admin shows and validates: the model's row.
    category = Category.objects.get(key="comment.posted")
    assert digest_settings("comment.posted") == ({"email": 1800}, "thread_id", {})
    category.full_clean()

    # The next route digests email: the pipeline reads the category with the notification.
    now = timezone.now()
    after = comment_event(category, ann, 2)
    notification_route(notification_id=str(after.pk), now=now)
    email = Delivery.objects.get(notification=after, channel="email")
    assert email.status == DeliveryStatus.DIGESTING
    window = DigestWindow.objects.get()
    assert (window.channel, window.digest_key) == ("email", "t1")
    assert window.closes_at - now == timedelta(seconds=1800)

    # Fields left out stay; an empty object clears.
    cleared = api.patch("/v1/categories/comment.posted", {"digest_windows": {}}, format="json")
    assert cleared.status_code == 200, cleared.content
    assert digest_settings("comment.posted") == ({}, "thread_id", {})


# A value the schema already refuses is a 400; a well-formed one that this category's
# rules refuse is a 422. Each names the field, with the admin's own message.
BAD_INPUTS = [
    ({"digest_windows": {"email": 0}}, 400, "digest_windows", "above 0"),
    ({"digest_windows": {"email": -1800}}, 400, "digest_windows", "above 0"),
    ({"digest_windows": {"email": "soon"}}, 400, "digest_windows", "above 0"),
    ({"digest_windows": {"pigeon": 60}}, 400, "digest_windows", "applies to"),
    ({"digest_windows": ["email"]}, 400, "digest_windows", "per channel"),
    ({"delays_if_unread": {"inapp": 60}}, 400, "delays_if_unread", "applies to"),
    ({"delays_if_unread": {"email": 60}}, 422, "delays_if_unread", "not both"),
    ({"digest_key": "no_such_field"}, 422, "digest_key", "not a field of this category's"),
    # Email's published template lists `digest`: email cannot stop being digested.
    ({"digest_windows": {"webpush": 60}}, 422, "digest_windows", "exists only on a channel"),
]


@pytest.mark.parametrize(("body", "status", "field", "says"), BAD_INPUTS)
def test_bad_digest_settings_are_refused_naming_the_field_and_change_nothing(
    api, body, status, field, says
):
    comment_category(digest_windows={"email": 600}, owner=shop())
    before = digest_settings("comment.posted")

    refused = api.patch("/v1/categories/comment.posted", body, format="json")

    assert refused.status_code == status, refused.content
    error = refused.json()["error"]
    code = "invalid" if status == 400 else "invalid_settings"
    assert (error["code"], error["field"]) == (code, field)
    assert says in error["message"], error["message"]
    assert digest_settings("comment.posted") == before


def test_a_mandatory_category_cannot_be_digested_or_delayed(api):
    Category.objects.create(key="login.code", queue="high", mandatory=True, owner=shop())
    for body, field in (
        ({"digest_windows": {"email": 1800}}, "digest_windows"),
        ({"delays_if_unread": {"sms": 60}}, "delays_if_unread"),
    ):
        refused = api.patch("/v1/categories/login.code", body, format="json")
        assert refused.status_code == 422, refused.content
        error = refused.json()["error"]
        assert (error["code"], error["field"]) == ("invalid_settings", field)
        assert "a mandatory category goes at once" in error["message"]
    assert digest_settings("login.code") == ({}, "", {})


def test_a_key_without_the_scope_is_a_403_and_a_user_token_too(demo_data):
    window = {"digest_windows": {"email": 1800}}
    sender = client_for(api_key_issue(producer_name="s", scopes=["notifications:send"]).key)
    assert_missing_scope(sender.get("/v1/categories"))
    assert_missing_scope(sender.get("/v1/categories/order.shipped"))
    assert_missing_scope(sender.patch("/v1/categories/order.shipped", window, format="json"))

    reader = client_for(api_key_issue(producer_name="r", scopes=["categories:read"]).key)
    assert reader.get("/v1/categories").status_code == 200
    assert reader.get("/v1/categories/order.shipped").status_code == 200
    assert_missing_scope(reader.patch("/v1/categories/order.shipped", window, format="json"))

    writer_key = api_key_issue(producer_name="w", scopes=["categories:write"])
    Category.objects.filter(key="order.shipped").update(owner=writer_key.api_key.producer)
    writer = client_for(writer_key.key)
    changed = writer.patch("/v1/categories/order.shipped", window, format="json")
    assert changed.status_code == 200, changed.content

    # A key limited to other categories may not change this one.
    promo = client_for(
        api_key_issue(
            producer_name="w", category_keys=["promo.weekly"], scopes=["categories:write"]
        ).key
    )
    refused = promo.patch("/v1/categories/order.shipped", {"digest_windows": {}}, format="json")
    assert (refused.status_code, refused.json()["error"]["code"]) == (403, "category_not_allowed")

    person = Recipient.objects.create(user_id="tok")
    user = APIClient()
    user.credentials(HTTP_AUTHORIZATION=f"Bearer {user_token_issue(recipient_id=person.pk)}")
    assert user.get("/v1/categories").status_code == 403
    assert user.patch("/v1/categories/order.shipped", window, format="json").status_code == 403
    assert digest_settings("order.shipped")[0] == {"email": 1800}  # the writer's


def test_an_unknown_category_is_a_404(api):
    for response in (
        api.get("/v1/categories/no.such"),
        api.patch("/v1/categories/no.such", {"digest_windows": {}}, format="json"),
    ):
        assert response.status_code == 404, response.content
        assert response.json()["error"] == {
            "code": "not_found",
            "message": "No category 'no.such'.",
        }


def test_the_readme_lists_every_scope():
    readme = (Path(__file__).resolve().parents[3] / "README.md").read_text()
    assert [scope for scope in Scope.values if f"`{scope}`" not in readme] == []


def test_the_admin_form_refuses_removing_a_window_that_a_published_template_lists(db):
    from templates_admin.category_admin import CategoryTemplatesForm

    comments = comment_category(digest_windows={"email": 600})
    data = {
        "key": comments.key,
        "queue": "medium",
        "payload_schema": json.dumps(COMMENT_SCHEMA),
        "sample_payloads": json.dumps(COMMENT_SAMPLES),
        "default_channels": '["inapp", "email"]',
        "fallback_channel": "",
        "ttl_seconds": "",
        "digest_key": "",
        "delays_if_unread": "{}",
    }
    form = CategoryTemplatesForm(
        data={**data, "digest_windows": '{"webpush": 60}'}, instance=comments
    )
    assert not form.is_valid()
    assert "exists only on a channel" in " ".join(form.errors["digest_windows"])
    form = CategoryTemplatesForm(
        data={**data, "digest_windows": '{"email": 1800}'}, instance=comments
    )
    assert form.is_valid(), form.errors
