"""A notification's link is an http(s) URL or a path on the product's site, nothing else:
a template whose link could run a script is refused at save, and one written past that
check reaches the feed without its link (the entry itself still arrives)."""

from __future__ import annotations

import pytest
from django.urls import reverse

from deliveries.models import Delivery, DeliveryStatus
from deliveries.pipeline.attempt import delivery_attempt
from deliveries.pipeline.routing import notification_route
from deliveries.support.demo import CATEGORIES
from notify.links import link_is_safe
from notify.models import Category, Notification, Producer, Recipient
from templates_admin.models import Template, TemplateVersion
from templates_admin.services import template_version_publish
from templates_admin.validation import template_version_check

ORDER = next(c for c in CATEGORIES if c["key"] == "order.shipped")
PROMO = next(c for c in CATEGORIES if c["key"] == "promo.weekly")
LINK_RULE = "a link must start with https:// or http://, or be a path on your site such as /orders"
SCRIPT_REFUSED = f"Link: a link may not run a script (javascript:, vbscript:, data:); {LINK_RULE}."
BAD_LINKS = [
    "javascript:alert(1)",
    " JaVaScRiPt:alert(1)",
    "java\tscript:alert(1)",
    "\x01\x02 javascript:alert(1)",
    "data:text/html,<script>alert(1)</script>",
    "vbscript:msgbox(1)",
    "mailto:someone@example.com",
    "//evil.example/orders",
    "\\\\evil.example/orders",
]


def check(url: str, *, category=ORDER, channel: str = "inapp", samples=None) -> list[str]:
    problems = template_version_check(
        channel=channel,
        locale="en",
        fields={
            "title": "Order {{ order_number }}" if category is ORDER else "{{ headline }}",
            "url": url,
        },
        schema=category["payload_schema"],
        sample_payloads=category["sample_payloads"] if samples is None else samples,
    )
    return [str(problem) for problem in problems]


@pytest.mark.parametrize("url", BAD_LINKS)
def test_only_http_links_and_paths_on_the_site_are_safe(url):
    assert not link_is_safe(url)
    for good in (
        "https://shop.example/o/1",
        "HTTP://shop.example",
        "/orders/1",
        "orders/1",
        "?tab=2",
        "#top",
    ):
        assert link_is_safe(good), good


@pytest.mark.parametrize(
    "url,problem",
    [
        ("javascript:alert(1)", SCRIPT_REFUSED),
        (" JaVaScRiPt:alert({{ order_number }})", SCRIPT_REFUSED),
        ("java\tscript:alert(1)", SCRIPT_REFUSED),
        ("{% if items_count > 1 %}javascript:alert(1){% else %}/o{% endif %}", SCRIPT_REFUSED),
        ('{{ order_number|default:"data:text/html,x" }}', SCRIPT_REFUSED),
        (
            "mailto:shop@example.com?subject={{ order_number }}",
            f"Link: the link starts with “mailto:shop@example.com?subject=”; {LINK_RULE}.",
        ),
        (
            "//evil.example/{{ order_number }}",
            f"Link: the link starts with “//evil.example/”; {LINK_RULE}.",
        ),
    ],
)
def test_a_link_with_a_script_or_another_scheme_in_its_text_is_refused_at_save(url, problem):
    assert check(url) == [problem]


def test_a_link_whose_sample_renders_a_script_is_refused_at_save():
    samples = [
        {"headline": "Sale", "url": "https://shop.example/sale"},
        {"headline": "Sale", "url": " JavaScript:alert(document.cookie)"},
    ]
    for channel in ("inapp", "webpush"):
        assert check("{{ url }}", category=PROMO, channel=channel, samples=samples) == [
            "Link: with sample payload #2 the link is “JavaScript:alert(document.cookie)”; "
            f"{LINK_RULE}."
        ]


@pytest.mark.parametrize(
    "url",
    [
        "/orders/{{ order_number }}",
        "https://shop.example/o/{{ order_number }}",
        "?order={{ order_number|urlencode }}",
        "",
        "{% if items_count > 1 %}/many{% endif %}",
    ],
)
def test_http_links_and_paths_on_the_site_still_save(url):
    assert check(url) == []


def test_the_admin_form_refuses_a_javascript_link_and_says_why(editor_client, order_template):
    before = order_template.versions.count()
    page = editor_client.post(
        reverse("admin:templates_admin_template_new_version", args=[order_template.pk]),
        {"title": "Order {{ order_number }}", "body": "", "url": "javascript:alert(1)"},
    )
    assert "a link may not run a script (javascript:, vbscript:, data:)" in page.content.decode()
    assert order_template.versions.count() == before


def deliver(*, url: str, payload: dict, user_id: str) -> Recipient:
    """Publish an in-app version with this link, written past validation, and deliver one
    order.shipped notification to a new person through routing and the sender."""
    template = Template.objects.get(category__key="order.shipped", channel="inapp", locale="en")
    version = TemplateVersion.objects.create(
        template=template, number=60, title="Order {{ order_number }} is on its way", url=url
    )
    template_version_publish(version=version)
    person = Recipient.objects.create(user_id=user_id, locale="en")
    notification = Notification.objects.create(
        producer=Producer.objects.get_or_create(name="links")[0],
        event_id=user_id,
        recipient=person,
        category=Category.objects.get(key="order.shipped"),
        payload={"delivery_date": "2026-12-03", "items_count": 1, **payload},
        channels=["inapp"],
        fingerprint="x",
    )
    notification_route(notification_id=str(notification.pk))
    delivery = Delivery.objects.get(notification=notification, channel="inapp")
    delivery_attempt(delivery_id=delivery.pk)
    delivery.refresh_from_db()
    assert delivery.status == DeliveryStatus.DELIVERED
    return person


@pytest.mark.parametrize(
    "url,payload",
    [
        ("javascript:alert(1)", {"order_number": "A-1"}),
        ("{{ order_number }}", {"order_number": " JaVaScRiPt:alert(1)"}),
        ("{{ order_number }}", {"order_number": "java\tscript:alert(1)"}),
        ("{{ order_number }}", {"order_number": "//evil.example"}),
    ],
    ids=["in-the-text", "from-the-payload", "with-a-tab", "protocol-relative"],
)
def test_a_row_written_past_validation_reaches_the_feed_without_its_link(api, url, payload):
    deliver(url=url, payload=payload, user_id="linked-1")
    [entry] = api.get("/v1/users/linked-1/feed").json()["results"]
    assert entry["title"].startswith("Order ") and entry["title"].endswith(" is on its way")
    assert entry["url"] == ""


def test_a_safe_link_reaches_the_feed_as_rendered(api):
    deliver(url="/orders/{{ order_number }}", payload={"order_number": "A-7"}, user_id="linked-2")
    [entry] = api.get("/v1/users/linked-2/feed").json()["results"]
    assert entry["url"] == "/orders/A-7"
