"""The demo a new user starts from: every default channel has a working template."""

from __future__ import annotations

import io
import subprocess
import sys
import uuid

import pytest
from django.core.management import call_command
from rest_framework.test import APIClient

from deliveries.support.demo import CATEGORIES
from notify.models import Category
from templates_admin.models import Template
from templates_admin.services import VERSION_FIELDS, template_version_problems
from tests.conftest import ROOT


def run(*command: str) -> list[str]:
    out = io.StringIO()
    call_command(*command, stdout=out)
    return out.getvalue().strip().splitlines()


def test_seed_demo_twice_then_create_producer_gives_a_key_that_sends_a_demo_event(db):
    run("seed_demo")
    assert run("seed_demo") == [
        "Demo data ready: 0 new categories, 0 new templates, 0 new recipients"
    ]  # the second run changes nothing
    key = run("create_producer", "demo-shop")[-1]

    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")
    response = client.post(
        "/v1/notifications",
        {
            "event_id": str(uuid.uuid4()),
            "user_id": "demo-user",
            "category": "order.shipped",
            "payload": {"order_number": "A-1001", "delivery_date": "2026-12-03", "items_count": 1},
        },
        format="json",
    )
    assert response.status_code == 202, response.content


@pytest.mark.parametrize("spec", CATEGORIES, ids=lambda spec: spec["key"])
def test_every_default_channel_of_a_demo_category_has_a_valid_published_template(db, spec):
    call_command("seed_demo", stdout=io.StringIO())
    category = Category.objects.get(key=spec["key"])
    for channel in category.default_channels:
        for locale in ("en", "ru"):
            template = Template.objects.filter(
                category=category, channel=channel, locale=locale
            ).first()
            assert template is not None, f"no {channel}/{locale} template"
            version = template.published_version
            assert version is not None, f"{channel}/{locale} is not published"
            fields = {name: getattr(version, name) for name in VERSION_FIELDS}
            assert template_version_problems(template=template, fields=fields) == [], (
                f"{channel}/{locale}"
            )


@pytest.mark.parametrize(("smpp_host", "sms_on"), [(None, False), ("smsc.example.net", True)])
def test_sms_is_on_exactly_when_smpp_host_is_set(smpp_host, sms_on):
    env = {"PATH": "/usr/bin:/bin", "DJANGO_SETTINGS_MODULE": "config.settings"}
    if smpp_host:
        env["SMPP_HOST"] = smpp_host
    result = subprocess.run(
        [
            sys.executable,
            "manage.py",
            "shell",
            "-c",
            "from django.conf import settings; print(','.join(settings.NOTIFY_CHANNELS_ENABLED))",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        check=True,
    )
    assert ("sms" in result.stdout.strip().split(",")) is sms_on
