"""Staff cannot break a category by a typo in its schema, nor silently break its
published templates by changing it."""

from __future__ import annotations

import json

from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from notify.models import Category


def staff_client() -> Client:
    client = Client()
    client.force_login(User.objects.create_superuser("root", "root@staff.example", "pw"))
    return client


def form_data(category: Category, **changes) -> dict:
    data = {
        "key": category.key,
        "description": category.description,
        "queue": category.queue,
        "mandatory": category.mandatory,
        "marketing": category.marketing,
        "payload_schema": json.dumps(category.payload_schema),
        "sample_payloads": json.dumps(category.sample_payloads),
        "default_channels": json.dumps(category.default_channels),
        "fallback_channel": category.fallback_channel,
        "ttl_seconds": category.ttl_seconds or "",
    }
    data.update({k: json.dumps(v) for k, v in changes.items()})
    return {k: v for k, v in data.items() if v is not False}


def test_a_schema_that_is_not_json_schema_is_refused_naming_the_place(demo_data):
    category = Category.objects.get(key="order.shipped")
    url = reverse("admin:notify_category_change", args=[category.pk])
    broken = {**category.payload_schema, "type": "objekt"}
    response = staff_client().post(url, form_data(category, payload_schema=broken))
    assert response.status_code == 200  # the form again, with the error
    assert "Not a valid JSON Schema" in response.content.decode()
    category.refresh_from_db()
    assert category.payload_schema["type"] == "object"


def test_a_schema_change_that_breaks_a_published_template_is_refused_naming_it(demo_data):
    category = Category.objects.get(key="order.shipped")
    url = reverse("admin:notify_category_change", args=[category.pk])
    schema = json.loads(json.dumps(category.payload_schema))
    del schema["properties"]["order_number"]  # the templates print {{ order_number }}
    schema["required"] = [name for name in schema.get("required", []) if name != "order_number"]
    samples = [
        {k: v for k, v in s.items() if k != "order_number"} for s in category.sample_payloads
    ]
    response = staff_client().post(
        url, form_data(category, payload_schema=schema, sample_payloads=samples)
    )
    page = response.content.decode()
    assert response.status_code == 200
    assert "The published template order.shipped" in page
    assert "order_number" in page
    category.refresh_from_db()
    assert "order_number" in category.payload_schema["properties"]


def test_a_compatible_schema_change_is_saved(demo_data):
    category = Category.objects.get(key="order.shipped")
    url = reverse("admin:notify_category_change", args=[category.pk])
    schema = json.loads(json.dumps(category.payload_schema))
    schema["properties"]["tracking_url"] = {"type": "string"}
    response = staff_client().post(url, form_data(category, payload_schema=schema))
    assert response.status_code == 302, response.content.decode()[:2000]
    category.refresh_from_db()
    assert "tracking_url" in category.payload_schema["properties"]


def test_a_marketing_category_cannot_be_put_on_the_high_queue(demo_data):
    staff = staff_client()
    category = Category.objects.get(key="promo.weekly")
    url = reverse("admin:notify_category_change", args=[category.pk])
    response = staff.post(url, {**form_data(category), "queue": "high"})
    assert response.status_code == 200  # the form again, with the error
    assert "A marketing category rides the low queue" in response.content.decode()
    category.refresh_from_db()
    assert category.queue == "low"

    # Nor made marketing while it sits on high.
    codes = Category.objects.get(key="security.login_code")
    url = reverse("admin:notify_category_change", args=[codes.pk])
    response = staff.post(url, {**form_data(codes), "marketing": "on"})
    assert "A marketing category rides the low queue" in response.content.decode()
    codes.refresh_from_db()
    assert not codes.marketing
