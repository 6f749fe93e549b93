"""Rendering: escaping per channel, push truncation, plurals, dates and money."""

from __future__ import annotations

import pytest

from notify.models import Category
from templates_admin.filters import plural_form
from templates_admin.models import Template
from templates_admin.rendering import build_context, render_version, truncate_at_word
from templates_admin.selectors import published_choices_sql, published_version_pick
from templates_admin.services import template_version_draft, template_version_publish

SCRIPT = "<script>alert(1)</script>"


@pytest.fixture
def greeting(db):
    return Category.objects.create(
        key="account.greeting",
        payload_schema={
            "type": "object",
            "properties": {
                "name": {"type": "string"},
                "count": {"type": "integer"},
                "total": {"type": "number"},
                "at": {"type": "string", "format": "date-time"},
                "text": {"type": "string"},
            },
            "required": ["name", "count", "total", "at"],
        },
        sample_payloads=[{"name": "Ann", "count": 2, "total": 10, "at": "2026-12-03T21:30:00Z"}],
    )


def published(category, channel, locale="en", **fields):
    template = Template.objects.create(category=category, channel=channel, locale=locale)
    version = template_version_draft(template=template, fields=fields)
    template_version_publish(version=version)
    version.refresh_from_db()
    return version


def context(payload, locale="en", timezone="UTC"):
    return build_context(
        payload, recipient={"user_id": "u1", "locale": locale, "timezone": timezone}
    )


def test_a_script_in_the_payload_is_escaped_in_html_email_and_literal_elsewhere(greeting):
    ctx = context({"name": SCRIPT, "count": 1, "total": 1, "at": "2026-12-03T10:00:00Z"})
    email = published(greeting, "email", subject="Hi {{ name }}", html_body="<p>Hi {{ name }}</p>")
    rendered = render_version(email, ctx)
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in rendered.html
    assert SCRIPT not in rendered.html
    assert rendered.subject == f"Hi {SCRIPT}"  # a header is text, not HTML
    assert rendered.text == f"Hi {SCRIPT}"  # generated from HTML, entities decoded
    for channel in ("webpush", "sms", "inapp"):
        fields = {"body": "Hi {{ name }}"} if channel == "sms" else {"title": "Hi {{ name }}"}
        message = render_version(published(greeting, channel, **fields), ctx)
        shown = message.body if channel == "sms" else message.title
        assert shown == f"Hi {SCRIPT}", channel
        assert "&lt;" not in shown


def test_a_400_character_push_body_is_cut_at_a_word_boundary_with_an_ellipsis(greeting):
    push = published(greeting, "webpush", title="News for {{ name }}", body='{{ text|default:"" }}')
    words = ["lorem", "ipsum", "dolor", "sit", "amet", "consectetur", "adipiscing", "elit"]
    text = " ".join(words[i % len(words)] for i in range(80))[:400]
    assert len(text) == 400
    body = render_version(
        push, context({"name": "Ann", "count": 1, "total": 1, "at": "", "text": text})
    ).body
    assert len(body) <= 150
    assert body.endswith("…")
    kept = body[:-1]
    assert text.startswith(kept)
    assert text[len(kept)] == " "  # the cut falls between two words
    assert truncate_at_word("short text", 150) == "short text"


@pytest.mark.parametrize(
    "count,form",
    [
        (1, "заказ"),
        (2, "заказа"),
        (5, "заказов"),
        (11, "заказов"),
        (21, "заказ"),
        (22, "заказа"),
        (25, "заказов"),
    ],
)
def test_russian_plurals_follow_cldr(greeting, count, form):
    version = published(
        greeting,
        "inapp",
        locale="ru",
        title='{{ count }} {{ count|plural:"заказ,заказа,заказов" }}',
    )
    payload = {"name": "Аня", "count": count, "total": 1, "at": ""}
    assert render_version(version, context(payload, locale="ru-RU")).title == f"{count} {form}"


def test_english_plurals(greeting):
    version = published(greeting, "inapp", title='{{ count }} {{ count|plural:"order,orders" }}')
    one = render_version(version, context({"name": "A", "count": 1, "total": 1, "at": ""}))
    two = render_version(version, context({"name": "A", "count": 2, "total": 1, "at": ""}))
    assert (one.title, two.title) == ("1 order", "2 orders")
    assert plural_form(21, "order,orders") == "orders"


def test_dates_times_and_money_follow_the_recipients_zone_and_locale(greeting):
    version = published(
        greeting,
        "inapp",
        title='{{ at|date:"long" }} {{ at|time }}',
        body='{{ total|money:"RUB" }}',
    )
    payload = {"name": "A", "count": 1, "total": 1234.5, "at": "2026-12-03T21:30:00Z"}
    moscow = render_version(version, context(payload, locale="ru-RU", timezone="Europe/Moscow"))
    assert moscow.title == "4 декабря 2026\u202f\u0433. 00:30"  # already the next day in Moscow
    assert moscow.body == "1\xa0234,50\xa0₽"
    london = render_version(version, context(payload, locale="en", timezone="Europe/London"))
    assert london.title == "December 3, 2026 9:30\u202fPM"
    assert london.body == "RUB1,234.50"  # CLDR en: ISO code, English grouping


def published_version_for(category, channel, locale):
    """The version routing and the sender pick: the published choices read with the row,
    then the pick for the recipient's locale."""
    choices = (
        Category.objects.filter(pk=category.pk)
        .annotate(
            choices=published_choices_sql(
                category_column=f'"{Category._meta.db_table}"."id"', channel_column=f"'{channel}'"
            )
        )
        .values_list("choices", flat=True)
        .get()
    )
    return published_version_pick(choices, locale=locale)


def test_a_missing_locale_falls_back_from_region_to_language_to_default(greeting):
    en = published(greeting, "inapp", locale="en", title="Hello")
    ru = published(greeting, "inapp", locale="ru", title="Привет")
    assert published_version_for(greeting, "inapp", locale="ru-RU") == ru
    assert published_version_for(greeting, "inapp", locale="de-AT") == en


@pytest.mark.parametrize(
    ("source", "html"),
    [
        ("Hi {{ name }}, <b>{{ text }}</b>", True),
        ("Hi {{ name }}, <b>{{ text }}</b>", False),
        (
            "{% for line in lines %}{{ forloop.counter }}/{{ forloop.revcounter }}"
            "{% if forloop.first %} first{% endif %}{% for x in line %}[{{ forloop.parentloop"
            ".counter }}.{{ x|upper }}]{% empty %}none{% endfor %}{% endfor %}",
            False,
        ),
        (
            "{% with total=count|add:2 %}{{ total }}{% endwith %} {% firstof missing name %}"
            "{% spaceless %}<p> <b>{{ name|default:'x' }}</b> </p>{% endspaceless %}"
            "{% comment %}hidden{% endcomment %}{{ count|plural:'item,items' }}",
            True,
        ),
    ],
)
def test_a_field_renders_as_djangos_own_render_of_its_template(source, html):
    from django.template import Context

    from templates_admin.fields import _compiled, render_field
    from templates_admin.models import TemplateVersion

    context = {
        "name": "Ann",
        "text": SCRIPT,
        "count": 3,
        "lines": [["a", "b"], [], ["c"]],
        "recipient": {"locale": "en", "timezone": "UTC"},
    }
    version = TemplateVersion(pk=None, subject=source)
    ours = render_field(version, "subject", context, html=html)
    for _ in range(2):  # the same compiled template, rendered again, renders the same
        assert render_field(version, "subject", context, html=html) == ours
    template = _compiled(None, "subject", source, html)
    assert ours == template.render(Context(context, autoescape=html)).strip()
