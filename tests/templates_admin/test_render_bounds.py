"""Rendering is bounded in time and output size: what can be seen is refused at save,
the rest stops the render (preview shows why; a delivery fails with `render_limit`)."""

from __future__ import annotations

import json
import time

import pytest
from django.urls import reverse

from deliveries.models import Delivery, DeliveryStatus, Reason
from deliveries.pipeline.attempt import delivery_attempt
from deliveries.pipeline.routing import notification_route
from deliveries.support.demo import CATEGORIES
from notify.models import Category, Notification, Producer, Recipient
from templates_admin.bounds import RenderLimitExceeded, budget_spend, render_budget
from templates_admin.fields import render_field
from templates_admin.models import Template, TemplateVersion
from templates_admin.services import template_version_create, template_version_publish
from templates_admin.validation import template_version_check

ORDER = next(c for c in CATEGORIES if c["key"] == "order.shipped")
NESTED_BEHIND_AN_IF = (
    "{% if items_count > 1000000 %}{% for a in lines %}{% for b in lines %}"
    "{% for c in lines %}{{ a }}{% endfor %}{% endfor %}{% endfor %}{% endif %}Order shipped"
)


def check(**fields) -> list[str]:
    schema = {
        **ORDER["payload_schema"],
        "properties": {**ORDER["payload_schema"]["properties"], "lines": {"type": "array"}},
        "required": [*ORDER["payload_schema"].get("required", []), "lines"],
    }
    problems = template_version_check(
        channel="inapp",
        locale="en",
        fields=fields,
        schema=schema,
        sample_payloads=ORDER["sample_payloads"],
    )
    return [str(problem) for problem in problems]


def test_a_huge_floatformat_precision_is_refused_at_save():
    problems = check(title='{{ items_count|floatformat:"300000000" }} items')
    assert problems == ["Title: line 1: floatformat may show at most 20 decimal places."]
    assert check(title='{{ items_count|floatformat:"2g" }} items') == []


def test_nested_loops_that_no_sample_reaches_are_refused_at_save():
    # The samples never enter the `if`: only the template's shape shows the danger.
    problems = check(title=NESTED_BEHIND_AN_IF)
    assert problems == ["Title: line 1: loops may be nested at most 2 deep; this one is 3."]


def test_the_admin_refuses_to_save_a_template_past_the_bounds(editor_client, order_template):
    before = order_template.versions.count()
    page = editor_client.post(
        reverse("admin:templates_admin_template_new_version", args=[order_template.pk]),
        {"title": '{{ items_count|floatformat:"300000000" }}', "body": "", "url": ""},
    )
    assert "floatformat may show at most 20 decimal places" in page.content.decode()
    assert order_template.versions.count() == before


def test_a_render_that_loops_without_output_stops_on_its_cpu_time(settings):
    # Nine million empty iterations: no output bound is reached, only the clock stops it.
    settings.NOTIFY_TEMPLATE_RENDER_SECONDS = 0.05
    version = TemplateVersion(
        pk=None, body="{% for a in lines %}{% for b in lines %}{% endfor %}{% endfor %}"
    )
    started = time.thread_time()
    with pytest.raises(RenderLimitExceeded, match=r"rendering takes more than 0\.05s of CPU"):
        render_field(version, "body", {"lines": list(range(3000))})
    assert time.thread_time() - started < 0.5  # all of it would take many seconds


def test_quick_renders_share_a_cpu_reading_and_a_slow_one_still_stops_at_its_bound(
    settings, monkeypatch
):
    # Reading a thread's CPU clock is a system call: a sender's quick fields share one
    # reading, and the render after them is still held to its bound.
    readings = []
    thread_time = time.thread_time
    monkeypatch.setattr(time, "thread_time", lambda: readings.append(1) or thread_time())
    quick = TemplateVersion(pk=None, body="Order {{ a }} shipped")
    for number in range(200):
        assert render_field(quick, "body", {"a": number}) == f"Order {number} shipped"
    assert len(readings) <= 10  # one per field would be 200

    settings.NOTIFY_TEMPLATE_RENDER_SECONDS = 0.05
    slow = TemplateVersion(
        pk=None, body="{% for a in lines %}{% for b in lines %}{% endfor %}{% endfor %}"
    )
    started = thread_time()
    with pytest.raises(RenderLimitExceeded, match=r"more than 0\.05s of CPU"):
        render_field(slow, "body", {"lines": list(range(3000))})
    spent = thread_time() - started
    assert 0.05 <= spent < 0.1  # never early; late by at most a share of the bound


def test_the_render_clock_counts_cpu_time_not_time_spent_waiting(settings):
    # A sender thread that waits (for the GIL, on a loaded machine) has not spun: only
    # the CPU time it spends rendering counts, and past the bound it stops at once.
    settings.NOTIFY_TEMPLATE_RENDER_SECONDS = 0.05
    with render_budget():
        time.sleep(0.2)
        budget_spend(0)  # four times the bound has passed, but not on the CPU
        started = time.thread_time()
        with pytest.raises(RenderLimitExceeded, match=r"more than 0\.05s of CPU"):
            while True:
                budget_spend(0)
        assert time.thread_time() - started < 0.1


def test_preview_stops_a_render_that_outgrows_its_bound_and_says_so(editor_client, order_template):
    # Two loops (allowed) over a pasted list of 3,000: nine million iterations.
    version = TemplateVersion.objects.create(
        template=order_template,
        number=99,
        title="{% for a in lines %}{% for b in lines %}{{ a }}{% endfor %}{% endfor %}",
    )
    payload = {"order_number": "A-1", "items_count": 1, "lines": list(range(3000))}
    page = editor_client.get(
        reverse("admin:templates_admin_template_preview", args=[version.pk]),
        {"payload": json.dumps(payload)},
    )
    assert page.status_code == 200
    text = page.content.decode()
    # Whichever bound it meets first, time or size, the page says so instead of spinning.
    assert "Rendering failed: rendering takes more than 1s of CPU" in text or (
        "Rendering failed: the text grows past" in text
    )


@pytest.mark.parametrize(
    "title",
    [
        "Order {{ order_number|floatformat:2 }} shipped",  # 1e999999999 as a number
        "Order {{ order_number|money:'EUR' }} shipped",
    ],
)
def test_a_delivery_whose_render_passes_the_bound_fails_with_render_limit(demo_data, title):
    template = Template.objects.get(category__key="order.shipped", channel="email", locale="en")
    version = template_version_create(
        template=template,
        fields={"subject": title, "html_body": "<p>{{ order_number }}</p>", "text_body": ""},
    )
    template_version_publish(version=version)
    person = Recipient.objects.create(user_id="bounds-1", email="b@example.com", locale="en")
    notification = Notification.objects.create(
        producer=Producer.objects.get_or_create(name="bounds")[0],
        event_id="bounds-1",
        recipient=person,
        category=Category.objects.get(key="order.shipped"),
        payload={"order_number": "1e999999999", "delivery_date": "2026-12-03", "items_count": 1},
        channels=["email"],
        fingerprint="x",
    )
    notification_route(notification_id=str(notification.pk))
    delivery = Delivery.objects.get(notification=notification, channel="email")

    delivery_attempt(delivery_id=delivery.pk)

    delivery.refresh_from_db()
    assert (delivery.status, delivery.reason) == (DeliveryStatus.FAILED, Reason.RENDER_LIMIT)
    assert "a number has more than 100 digits" in delivery.last_error
