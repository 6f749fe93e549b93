"""What a template computes counts against the render budget, not only what it writes:
values bound by `with`, chosen by `firstof`, evaluated in `if` conditions and made by
`add` and `join`. A draft that would build a huge value is refused at save, and a row
written past validation stops at once when rendered, without building it."""

from __future__ import annotations

import time
import tracemalloc

import pytest
from django.template import Context, Engine
from django.urls import reverse

from deliveries.models import Delivery, DeliveryStatus, Reason
from deliveries.pipeline.attempt import delivery_attempt
from deliveries.pipeline.routing import notification_route
from deliveries.support.demo import CATEGORIES
from notify.models import Category, Notification, Producer, Recipient
from templates_admin.bounds import RenderLimitExceeded
from templates_admin.fields import render_field
from templates_admin.models import Template, TemplateVersion
from templates_admin.services import template_version_publish
from templates_admin.validation import template_version_check

ORDER = next(c for c in CATEGORIES if c["key"] == "order.shipped")
BUDGET_ERROR = "grow past the render budget of 262144 characters"


def doubling(levels: int, variable: str = "order_number") -> str:
    """`levels` nested `with`s, each binding the variable to itself twice over."""
    opening = f"{{% with {variable}={variable}|add:{variable} %}}" * levels
    return f"Order {opening}{{{{ {variable}|length }}}}{'{% endwith %}' * levels}"


THIRTY_DOUBLINGS = doubling(30)


def check(**fields) -> list[str]:
    problems = template_version_check(
        channel="inapp",
        locale="en",
        fields=fields,
        schema=ORDER["payload_schema"],
        sample_payloads=ORDER["sample_payloads"],
    )
    return [str(problem) for problem in problems]


def rendered(source: str, **context) -> str:
    return render_field(TemplateVersion(pk=None, body=source), "body", context)


def test_thirty_nested_withs_that_double_a_string_are_refused_at_save():
    started = time.perf_counter()
    problems = check(title="Order {{ order_number }}", body=THIRTY_DOUBLINGS)
    assert time.perf_counter() - started < 2
    assert problems == [
        "Title: with sample payload #1 rendering failed: the values it computes (with, "
        f"firstof, if, add, join) {BUDGET_ERROR}.",
        "Title: with sample payload #2 rendering failed: the values it computes (with, "
        f"firstof, if, add, join) {BUDGET_ERROR}.",
    ]


def test_the_admin_form_says_why_the_doubling_draft_is_refused(editor_client, order_template):
    before = order_template.versions.count()
    page = editor_client.post(
        reverse("admin:templates_admin_template_new_version", args=[order_template.pk]),
        {"title": "Order {{ order_number }}", "body": THIRTY_DOUBLINGS, "url": ""},
    )
    assert BUDGET_ERROR in page.content.decode()
    assert order_template.versions.count() == before


@pytest.mark.parametrize(
    "source",
    [
        THIRTY_DOUBLINGS,
        # One `join` of a string by itself: its length squared.
        "{{ order_number|join:order_number }}",
        # `firstof … as` in a loop doubles the same variable on every iteration.
        "{% for line in lines %}{% firstof order_number|add:order_number as order_number %}"
        "{% endfor %}{{ order_number|length }}",
        # Inside an `if` condition, where Django's operators turn an error into "false".
        "{% with a=order_number|add:order_number %}{% with b=a|add:a %}{% with c=b|add:b %}"
        "{% if c|add:c|add:c|add:c == 'x' %}yes{% endif %}{% endwith %}{% endwith %}"
        "{% endwith %}",
    ],
    ids=["nested-with-add", "join-by-itself", "firstof-in-a-loop", "if-condition"],
)
def test_a_row_past_validation_stops_at_once_without_building_the_value(source):
    payload = {"order_number": "x" * 20_000, "lines": list(range(40))}
    tracemalloc.start()
    started = time.thread_time()
    try:
        with pytest.raises(RenderLimitExceeded, match=BUDGET_ERROR):
            rendered(source, **payload)
        spent = time.thread_time() - started
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert spent < 0.5
    # The render stopped within one step of the budget (256 K characters): a few MB at
    # most, where the value it was asked for would be gigabytes.
    assert peak < 8_000_000


def test_a_delivery_of_a_version_written_past_validation_fails_with_the_budgets_error(demo_data):
    template = Template.objects.get(category__key="order.shipped", channel="inapp", locale="en")
    version = TemplateVersion.objects.create(
        template=template, number=50, title="Order {{ order_number }}", body=THIRTY_DOUBLINGS
    )
    template_version_publish(version=version)
    person = Recipient.objects.create(user_id="doubling-1", locale="en")
    notification = Notification.objects.create(
        producer=Producer.objects.get_or_create(name="bounds")[0],
        event_id="doubling-1",
        recipient=person,
        category=Category.objects.get(key="order.shipped"),
        payload={"order_number": "A-1", "delivery_date": "2026-12-03", "items_count": 1},
        channels=["inapp"],
        fingerprint="x",
    )
    notification_route(notification_id=str(notification.pk))
    delivery = Delivery.objects.get(notification=notification, channel="inapp")

    started = time.perf_counter()
    delivery_attempt(delivery_id=delivery.pk)
    assert time.perf_counter() - started < 5

    delivery.refresh_from_db()
    assert (delivery.status, delivery.reason) == (DeliveryStatus.FAILED, Reason.RENDER_LIMIT)
    assert BUDGET_ERROR in delivery.last_error
    assert not person.feed.exists()


ORDINARY = (
    "{% with name=first|add:' '|add:last total=count|add:2 %}{{ name }} ({{ total }}){% endwith %}"
    " | {% firstof nickname first 'friend' %}"
    " | {% firstof missing|add:'' 'fallback' as chosen %}{{ chosen }}"
    " | {{ tags|join:', ' }} | {{ first|add:last|join:'.' }}"
    " | {% if tags|join:'' == 'ab' and count|add:1 > 2 %}joined{% else %}no{% endif %}"
    " | {% for t in tags|add:more %}{{ t }}{% endfor %}"
)


def test_ordinary_templates_with_with_firstof_if_add_and_join_render_as_before():
    context = {
        "first": "Ann",
        "last": "Lee",
        "nickname": "",
        "count": 3,
        "tags": ["<b>", "b"],
        "more": ["c"],
    }
    assert rendered(ORDINARY, **context) == (
        "Ann Lee (5) | Ann | fallback | <b>, b | A.n.n.L.e.e | no | <b>bc"
    )
    # The same as Django's own tags and filters give, as text and as escaped HTML.
    for html in (False, True):
        stock = (
            Engine(autoescape=html).from_string(ORDINARY).render(Context(context, autoescape=html))
        )
        version = TemplateVersion(pk=None, html_body=ORDINARY)
        assert render_field(version, "html_body", context, html=html) == stock.strip()
