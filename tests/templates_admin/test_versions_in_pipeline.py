"""Every delivery keeps the version that produced it, through the real pipeline."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from deliveries.models import Delivery
from templates_admin.models import Template, TemplateVersion
from tests.deliveries.pipeline.test_pipeline_e2e import post_event, register
from tests.statuses import settled
from tests.waiting import wait_for

pytestmark = pytest.mark.e2e


def test_deliveries_before_and_after_publishing_v2_show_v1_and_v2(api, pipeline, publisher):
    register(api, "u-versions", email="vera@example.com", locale="en", timezone="UTC")
    template = Template.objects.get(category__key="order.shipped", channel="inapp", locale="en")

    first = post_event(api, user_id="u-versions", channels=["inapp"]).json()["notification_id"]
    before = wait_for(settled(api, first, {"inapp"}), what="the first delivery")
    assert before["inapp"]["status"] == "delivered"
    assert before["inapp"]["template_version"] == 1

    staff = Client()
    staff.force_login(publisher)
    staff.post(
        reverse("admin:templates_admin_template_new_version", args=[template.pk]),
        {"title": "Parcel {{ order_number }} is coming", "body": "Soon.", "url": "/o"},
    )
    v2 = TemplateVersion.objects.get(template=template, number=2)
    response = staff.post(reverse("admin:templates_admin_template_publish", args=[v2.pk]))
    assert response.status_code == 302

    second = post_event(api, user_id="u-versions", channels=["inapp"]).json()["notification_id"]
    after = wait_for(settled(api, second, {"inapp"}), what="the second delivery")
    assert after["inapp"]["template_version"] == 2
    # Publishing v2 did not rewrite what the first delivery recorded.
    assert (
        api.get(f"/v1/notifications/{first}/status").json()["deliveries"][0]["template_version"]
        == 1
    )
    feed = api.get("/v1/users/u-versions/feed").json()["results"]
    assert [entry["title"] for entry in feed] == [
        "Parcel A-1001 is coming",
        "Order A-1001 is on its way",
    ]

    # In the admin, each delivery links the exact version it used.
    admin = Client()
    admin.force_login(User.objects.create_superuser("root", "root@staff.example", "pw"))
    for notification_id, number in ((first, 1), (second, 2)):
        delivery = Delivery.objects.get(notification_id=notification_id, channel="inapp")
        page = admin.get(reverse("admin:deliveries_delivery_change", args=[delivery.pk]))
        assert f"order.shipped / inapp / en v{number}" in page.content.decode()
    preview = staff.get(reverse("admin:templates_admin_template_preview", args=[v2.pk]))
    assert "Used by 1 delivery" in preview.content.decode()
