"""Staff users for the template admin: an editor (drafts, previews) and a publisher, and
the editor's own recipient with the "Send test to me" button (other folders' tests of
test sends import these)."""

from __future__ import annotations

import json

import pytest


def _staff(username: str, group):
    from django.contrib.auth.models import User

    user = User.objects.create_user(
        username=username,
        password="pw-" + username,
        email=f"{username}@staff.example",
        is_staff=True,
    )
    user.groups.add(group)
    return user


@pytest.fixture
def editor(db):
    from templates_admin.roles import template_editor_group_ensure

    return _staff("editor", template_editor_group_ensure())


@pytest.fixture
def publisher(db):
    from templates_admin.roles import template_publisher_group_ensure

    return _staff("publisher", template_publisher_group_ensure())


@pytest.fixture
def editor_client(client, editor):
    client.force_login(editor)
    return client


@pytest.fixture
def publisher_client(publisher):
    from django.test import Client

    client = Client()
    client.force_login(publisher)
    return client


@pytest.fixture
def order_template(demo_data):
    """The demo `order.shipped` in-app template in English (v1 published by seed_demo)."""
    from templates_admin.models import Template

    return Template.objects.get(category__key="order.shipped", channel="inapp", locale="en")


@pytest.fixture
def me(demo_data, editor):
    """The recipient linked to the editor: the same email, in another case."""
    from notify.models import Recipient

    return Recipient.objects.create(
        user_id="ed-1", email="Editor@Staff.Example", phone="+14155550142", locale="en"
    )


def send_test(client, template, payload: dict | None = None, locale: str = "en") -> list[str]:
    """Press "Send test to me" on the preview of the template's published version; returns
    the messages the admin showed."""
    from django.contrib.messages import get_messages
    from django.urls import reverse

    url = reverse("admin:templates_admin_template_send_test", args=[template.published_version_id])
    body = {"locale": locale, "payload": json.dumps(payload) if payload else ""}
    response = client.post(url, body)
    assert response.status_code == 302
    return [str(m) for m in get_messages(response.wsgi_request)]


def published_template(category: str, channel: str):
    """The demo template of this category and channel in English."""
    from templates_admin.models import Template

    return Template.objects.get(category__key=category, channel=channel, locale="en")
