"""Demo data for `seed_demo`: three categories with en and ru templates for every one of
their default channels (so turning a channel on never meets `no_template`), and recipients."""

from __future__ import annotations

from django.db import transaction

from notify.models import Category, QueueClass, Recipient
from preferences.services import RequestOrigin, marketing_consent_grant
from templates_admin.models import Template
from templates_admin.services import template_version_create, template_version_publish

CATEGORIES = [
    {
        "key": "security.login_code",
        "description": "One-time login code",
        "labels": {
            "ru": {
                "label": "Код для входа",
                "description": "Одноразовый код для входа в аккаунт",
            }
        },
        "queue": QueueClass.HIGH,
        "mandatory": True,
        "marketing": False,
        "default_channels": ["email", "sms"],
        "payload_schema": {
            "type": "object",
            "properties": {
                "code": {"type": "string", "minLength": 4, "maxLength": 12, "x-sensitive": True}
            },
            "required": ["code"],
            "additionalProperties": False,
        },
        "sample_payloads": [{"code": "482913"}],
        # A login code is useless once expired: no channel sends it after 10 minutes.
        "ttl_seconds": 600,
        # Late is worse than twice: a call that ends unanswered goes to the next provider.
        "speed_over_duplicate": True,
    },
    {
        "key": "order.shipped",
        "description": "An order left the warehouse",
        "labels": {
            "ru": {"label": "Заказ отправлен", "description": "Заказ покинул склад и едет к вам"}
        },
        "queue": QueueClass.MEDIUM,
        "mandatory": False,
        "marketing": False,
        "default_channels": ["inapp", "email", "webpush", "fcm"],
        "payload_schema": {
            "type": "object",
            "properties": {
                "order_number": {"type": "string", "minLength": 1},
                "delivery_date": {"type": "string", "format": "date"},
                "items_count": {"type": "integer", "minimum": 1},
            },
            "required": ["order_number", "delivery_date", "items_count"],
        },
        "sample_payloads": [
            {"order_number": "A-1001", "delivery_date": "2026-12-03", "items_count": 1},
            {"order_number": "B-20417", "delivery_date": "2026-12-24", "items_count": 5},
        ],
        "ttl_seconds": 24 * 3600,
    },
    {
        "key": "promo.weekly",
        "description": "Weekly offers",
        "labels": {
            "ru": {
                "label": "Предложения недели",
                "description": "Скидки и новинки магазина раз в неделю",
            }
        },
        "queue": QueueClass.LOW,
        "mandatory": False,
        "marketing": True,
        "default_channels": ["inapp", "email", "webpush"],
        "payload_schema": {
            "type": "object",
            "properties": {
                "headline": {"type": "string", "minLength": 1, "maxLength": 120},
                "url": {"type": "string", "format": "uri"},
            },
            "required": ["headline", "url"],
        },
        "sample_payloads": [
            {"headline": "Winter sale: -30% on boots", "url": "https://shop.example/sale"}
        ],
        # No TTL of its own: each channel's default deadline applies — the offer stays in
        # the feed for the week, an email is not sent after a day, a push after an hour
        # (a promo push arriving days late only annoys).
        "ttl_seconds": None,
    },
]

TEMPLATES: dict[tuple[str, str, str], dict[str, str]] = {
    ("security.login_code", "email", "en"): {
        "subject": "Your login code: {{ code }}",
        "html_body": "<p>Your login code is <strong>{{ code }}</strong>.</p>"
        "<p>It expires in 10 minutes. If it was not you, ignore this email.</p>",
    },
    ("security.login_code", "email", "ru"): {
        "subject": "Код для входа: {{ code }}",
        "html_body": "<p>Ваш код для входа: <strong>{{ code }}</strong>.</p>"
        "<p>Он действует 10 минут. Если это были не вы, просто проигнорируйте письмо.</p>",
    },
    ("security.login_code", "sms", "en"): {"body": "Your login code: {{ code }}"},
    ("security.login_code", "sms", "ru"): {"body": "Код для входа: {{ code }}"},
    ("order.shipped", "inapp", "en"): {
        "title": "Order {{ order_number }} is on its way",
        "body": "Expected delivery: {{ delivery_date }}.",
        "url": "/orders/{{ order_number }}",
    },
    ("order.shipped", "inapp", "ru"): {
        "title": "Заказ №{{ order_number }} в пути",
        "body": "Ожидаемая доставка — {{ delivery_date }}.",
        "url": "/orders/{{ order_number }}",
    },
    ("order.shipped", "email", "en"): {
        "subject": "Order {{ order_number }} has shipped",
        "html_body": "<p>Good news: order <strong>{{ order_number }}</strong> "
        "({{ items_count }} item{{ items_count|pluralize }}) has shipped.</p>"
        "<p>Expected delivery: {{ delivery_date }}.</p>",
        "text_body": "Good news: order {{ order_number }} ({{ items_count }} "
        "item{{ items_count|pluralize }}) has shipped.\nExpected delivery: {{ delivery_date }}.",
    },
    ("order.shipped", "email", "ru"): {
        "subject": "Заказ №{{ order_number }} отправлен",
        "html_body": "<p>Заказ <strong>№{{ order_number }}</strong> отправлен.</p>"
        "<p>Ожидаемая доставка — {{ delivery_date }}.</p>",
        "text_body": "Заказ №{{ order_number }} отправлен.\n"
        "Ожидаемая доставка — {{ delivery_date }}.",
    },
    ("order.shipped", "webpush", "en"): {
        "title": "Order {{ order_number }} shipped",
        "body": "Expected delivery: {{ delivery_date }}",
        "url": "/orders/{{ order_number }}",
    },
    ("order.shipped", "webpush", "ru"): {
        "title": "Заказ №{{ order_number }} в пути",
        "body": "Ожидаемая доставка — {{ delivery_date }}",
        "url": "/orders/{{ order_number }}",
    },
    ("order.shipped", "fcm", "en"): {
        "title": "Order {{ order_number }} shipped",
        "body": "Expected delivery: {{ delivery_date }}",
        "url": "/orders/{{ order_number }}",
    },
    ("order.shipped", "fcm", "ru"): {
        "title": "Заказ №{{ order_number }} в пути",
        "body": "Ожидаемая доставка — {{ delivery_date }}",
        "url": "/orders/{{ order_number }}",
    },
    ("promo.weekly", "inapp", "en"): {"title": "{{ headline }}", "body": "", "url": "{{ url }}"},
    ("promo.weekly", "inapp", "ru"): {"title": "{{ headline }}", "body": "", "url": "{{ url }}"},
    ("promo.weekly", "webpush", "en"): {
        "title": "{{ headline }}",
        "body": "This week's offers are in.",
        "url": "{{ url }}",
    },
    ("promo.weekly", "webpush", "ru"): {
        "title": "{{ headline }}",
        "body": "Новые предложения недели.",
        "url": "{{ url }}",
    },
    ("promo.weekly", "email", "en"): {
        "subject": "{{ headline }}",
        "html_body": '<h1>{{ headline }}</h1><p><a href="{{ url }}">See the offers</a></p>',
    },
    ("promo.weekly", "email", "ru"): {
        "subject": "{{ headline }}",
        "html_body": '<h1>{{ headline }}</h1><p><a href="{{ url }}">Смотреть предложения</a></p>',
    },
}

RECIPIENTS = [
    {
        "user_id": "demo-user",
        "email": "demo@example.com",
        "locale": "en",
        "timezone": "Europe/London",
    },
    {
        "user_id": "demo-user-ru",
        "email": "demo-ru@example.com",
        "locale": "ru-RU",
        "timezone": "Europe/Moscow",
        "phone": "+79990000000",
    },
]


def seed_demo() -> dict[str, int]:
    """Create or refresh the demo categories, templates and recipients; idempotent."""
    created = {"categories": 0, "templates": 0, "recipients": 0}
    with transaction.atomic():
        categories = {}
        for spec in CATEGORIES:
            fields = {k: v for k, v in spec.items() if k != "key"}
            category, was_created = Category.objects.update_or_create(
                key=spec["key"], defaults=fields
            )
            categories[category.key] = category
            created["categories"] += was_created
        for (category_key, channel, locale), fields in TEMPLATES.items():
            template, was_created = Template.objects.get_or_create(
                category=categories[category_key], channel=channel, locale=locale
            )
            if template.published_version_id is None:
                version = template_version_create(template=template, fields=fields)
                template_version_publish(version=version)
                created["templates"] += 1
        for spec in RECIPIENTS:
            recipient, was_created = Recipient.objects.get_or_create(
                user_id=spec["user_id"], defaults=spec
            )
            created["recipients"] += was_created
            if was_created:  # the demo users ticked "send me offers" at signup
                marketing_consent_grant(recipient=recipient, origin=RequestOrigin(source="signup"))
    return created
