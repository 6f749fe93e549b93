"""Staff users for the template admin: an editor (drafts, previews) and a publisher."""

from __future__ import annotations

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
