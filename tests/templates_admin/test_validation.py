"""Validation on save: what a marketer is told when a template cannot be saved."""

from __future__ import annotations

import pytest

from deliveries.support.demo import CATEGORIES, TEMPLATES
from templates_admin.validation import sms_segments, template_version_check

ORDER = next(c for c in CATEGORIES if c["key"] == "order.shipped")
SCHEMA = ORDER["payload_schema"]


def check(channel: str, locale: str = "en", schema=None, samples=None, **fields):
    problems = template_version_check(
        channel=channel,
        locale=locale,
        fields=fields,
        schema=SCHEMA if schema is None else schema,
        sample_payloads=ORDER["sample_payloads"] if samples is None else samples,
    )
    return [str(problem) for problem in problems]


def test_a_misspelt_variable_is_refused_naming_it_and_the_right_one():
    problems = check("inapp", title="Order {{ order_numbr }} shipped")
    assert len(problems) == 1
    assert "order_numbr" in problems[0]
    assert "Did you mean “order_number”" in problems[0]


@pytest.mark.parametrize(
    "source,tag",
    [
        ("{% load static %}Hi", "load"),
        ('{% include "secrets.html" %}', "include"),
        ('{% extends "base.html" %}', "extends"),
        ("{% debug %}", "debug"),
        ("{% ssi '/etc/passwd' %}", "ssi"),
        ("{% url 'admin:index' %}", "url"),
        ("{% csrf_token %}", "csrf_token"),
    ],
)
def test_dangerous_tags_are_refused_by_name(source, tag):
    problems = check("inapp", title=source)
    assert problems and f"{{% {tag} %}}" in problems[0]
    assert "not allowed" in problems[0]


def test_filters_outside_the_allow_list_are_refused():
    problems = check("email", subject="x", html_body="<p>{{ order_number|safe }}</p>")
    assert problems and "Invalid filter: 'safe'" in problems[0]
    assert "HTML body" in problems[0]


def test_a_syntax_error_names_its_line():
    problems = check("inapp", title="Order", body="line one\nline two\n{% if items_count %}open")
    assert len(problems) == 1
    assert problems[0].startswith("Body: line 3:")


def test_an_optional_variable_must_be_guarded_or_defaulted():
    schema = {
        "properties": {"name": {"type": "string"}, "coupon": {"type": "string"}},
        "required": ["name"],
    }
    samples = [{"name": "Ann"}]
    bare = check("inapp", schema=schema, samples=samples, title="{{ name }}: {{ coupon }}")
    assert len(bare) == 1 and "“coupon” is optional" in bare[0]
    guarded = "{{ name }}{% if coupon %}: {{ coupon }}{% endif %}"
    assert check("inapp", schema=schema, samples=samples, title=guarded) == []
    defaulted = '{{ name }}: {{ coupon|default:"no coupon" }}'
    assert check("inapp", schema=schema, samples=samples, title=defaulted) == []


def test_loop_variables_and_recipient_fields_are_known():
    title = (
        "{% for x in order_number %}{{ x }}{{ forloop.counter }}{% endfor %} {{ recipient.locale }}"
    )
    assert check("inapp", title=title) == []
    assert "recipient.email" in check("inapp", title="{{ recipient.email }}")[0]


def test_no_attribute_walk_on_a_plain_value():
    problems = check("inapp", title="{{ order_number.upper }}")
    assert problems and "“order_number.upper” does not exist" in problems[0]
    assert "underscore" in check("inapp", title="{{ order_number.__class__ }}")[0].lower()


def test_a_push_title_too_long_for_a_sample_payload_is_refused():
    title = "Your order {{ order_number }} has left our warehouse and is on its way to you"
    problems = check("webpush", title=title, body="Soon")
    assert problems and "sample payload #1" in problems[0] and "at most 50" in problems[0]


def test_sms_segments_count_gsm7_and_ucs2():
    assert sms_segments("a" * 160) == ("GSM-7", 1)
    assert sms_segments("a" * 161) == ("GSM-7", 2)
    assert sms_segments("a" * 459) == ("GSM-7", 3)
    assert sms_segments("€" * 80) == ("GSM-7", 1)  # extension characters count twice
    assert sms_segments("€" * 81) == ("GSM-7", 2)
    assert sms_segments("я" * 70) == ("UCS-2", 1)
    assert sms_segments("я" * 71) == ("UCS-2", 2)
    assert sms_segments("я" * 201) == ("UCS-2", 3)
    assert sms_segments("я" * 202) == ("UCS-2", 4)


def test_an_sms_over_three_parts_is_refused_and_says_why():
    long_ru = "Код {{ order_number }}. " + "Очень длинный текст. " * 12
    problems = check("sms", locale="ru", body=long_ru)
    assert problems and "UCS-2" in problems[0] and "the limit is 3" in problems[0]
    assert check("sms", body="Order {{ order_number }} shipped") == []


def test_every_demo_template_passes_validation():
    categories = {c["key"]: c for c in CATEGORIES}
    for (key, channel, locale), fields in TEMPLATES.items():
        problems = template_version_check(
            channel=channel,
            locale=locale,
            fields=fields,
            schema=categories[key]["payload_schema"],
            sample_payloads=categories[key]["sample_payloads"],
        )
        assert problems == [], (key, channel, locale, problems)
