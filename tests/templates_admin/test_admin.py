"""The template admin as staff use it: drafts, preview, diff, publish, test send."""

from __future__ import annotations

import json

from django.test import override_settings
from django.urls import reverse

from templates_admin.models import TemplatePublication, TemplateVersion


def url(name: str, *args) -> str:
    return reverse(f"admin:templates_admin_template_{name}", args=args)


def draft(client, template, **fields):
    return client.post(url("new_version", template.pk), fields)


def test_the_list_shows_each_template_with_its_published_version(editor_client, order_template):
    response = editor_client.get(url("changelist"))
    assert response.status_code == 200
    assert b"order.shipped" in response.content and b"v1" in response.content


def test_editing_saves_a_new_draft_and_leaves_the_published_text_alone(
    editor_client, order_template
):
    form = editor_client.get(url("new_version", order_template.pk))
    assert "Order {{ order_number }} is on its way" in form.content.decode()

    response = draft(editor_client, order_template, title="Order {{ order_number }} shipped!")
    assert response.status_code == 302
    v2 = TemplateVersion.objects.get(template=order_template, number=2)
    assert v2.title == "Order {{ order_number }} shipped!"
    assert v2.created_by.username == "editor"
    order_template.refresh_from_db()
    assert order_template.published_version.number == 1


def test_a_broken_draft_is_refused_with_the_reason_in_the_form(editor_client, order_template):
    response = draft(editor_client, order_template, title="Order {{ order_numbr }}")
    assert response.status_code == 200
    page = response.content.decode()
    assert "order_numbr" in page and "order_number" in page
    response = draft(editor_client, order_template, title="{% load static %}Hi")
    assert "{% load %} is not allowed" in response.content.decode()
    assert TemplateVersion.objects.filter(template=order_template).count() == 1


def test_an_editor_cannot_publish_and_a_publisher_can_with_a_logged_publish(
    editor_client, publisher_client, order_template
):
    draft(editor_client, order_template, title="Order {{ order_number }} shipped!")
    v2 = TemplateVersion.objects.get(template=order_template, number=2)

    preview = editor_client.get(url("preview", v2.pk))
    assert b"publish-button" not in preview.content
    assert editor_client.post(url("publish", v2.pk)).status_code == 403
    order_template.refresh_from_db()
    assert order_template.published_version.number == 1

    assert b"publish-button" in publisher_client.get(url("preview", v2.pk)).content
    assert publisher_client.post(url("publish", v2.pk)).status_code == 302
    order_template.refresh_from_db()
    assert order_template.published_version == v2
    log = TemplatePublication.objects.get(version=v2)
    assert log.published_by.username == "publisher" and log.published_at is not None
    page = publisher_client.get(url("change", order_template.pk)).content.decode()
    assert "Publish log" in page and "publisher" in page


def test_rollback_is_publishing_an_older_version(publisher_client, order_template):
    draft(publisher_client, order_template, title="Order {{ order_number }} v2")
    v1 = TemplateVersion.objects.get(template=order_template, number=1)
    v2 = TemplateVersion.objects.get(template=order_template, number=2)
    publisher_client.post(url("publish", v2.pk))
    publisher_client.post(url("publish", v1.pk))
    order_template.refresh_from_db()
    assert order_template.published_version == v1
    log = TemplatePublication.objects.filter(version__template=order_template)
    assert [(p.version.number, str(p.published_by)) for p in log][:2] == [
        (1, "publisher"),
        (2, "publisher"),
    ]


def test_preview_renders_samples_or_a_pasted_payload_in_any_locale(editor_client, demo_data):
    from templates_admin.models import Template

    ru = Template.objects.get(category__key="order.shipped", channel="webpush", locale="ru")
    version = ru.published_version
    page = editor_client.get(url("preview", version.pk), {"locale": "ru", "sample": 2})
    text = page.content.decode()
    assert "push-card" in text and "Заказ №B-20417 в пути" in text

    pasted = {"order_number": "<b>Z-9</b>", "delivery_date": "2026-12-31", "items_count": 3}
    page = editor_client.get(url("preview", version.pk), {"payload": json.dumps(pasted)})
    assert "Заказ №&lt;b&gt;Z-9&lt;/b&gt; в пути" in page.content.decode()  # page-escaped once

    email = Template.objects.get(category__key="order.shipped", channel="email", locale="en")
    page = editor_client.get(url("preview", email.published_version.pk), {"locale": "en"})
    text = page.content.decode()
    assert '<iframe class="email-frame"' in text and "Order A-1001 has shipped" in text

    bad = editor_client.get(url("preview", version.pk), {"payload": "{not json"})
    assert "not valid JSON" in bad.content.decode()


def test_diff_shows_both_versions_side_by_side(editor_client, order_template):
    draft(editor_client, order_template, title="Parcel {{ order_number }} is coming")
    v1, v2 = (TemplateVersion.objects.get(template=order_template, number=n) for n in (1, 2))
    page = editor_client.get(url("diff", v1.pk, v2.pk)).content.decode()
    assert "way" in page and "Parcel" in page and "v1" in page and "v2" in page
    assert page.count('class="diff"') == 3  # title, body, link


def test_send_test_to_me_arrives_in_the_staff_members_inbox(editor_client, demo_data, smtp):
    from templates_admin.models import Template

    email = Template.objects.get(category__key="order.shipped", channel="email", locale="ru")
    # The real SMTP backend (the test runner swaps in locmem) towards a real SMTP peer.
    smtp_backend = "django.core.mail.backends.smtp.EmailBackend"
    with override_settings(
        EMAIL_BACKEND=smtp_backend, EMAIL_HOST="127.0.0.1", EMAIL_PORT=smtp.port
    ):
        response = editor_client.post(
            url("send_test", email.published_version.pk), {"locale": "ru", "payload": ""}
        )
    assert response.status_code == 302
    received = smtp.received
    assert len(received) == 1
    assert received[0].rcpt_tos == ["editor@staff.example"]  # my staff account's address
    assert received[0].subject == "[Test] Заказ №A-1001 отправлен"
    assert "Ожидаемая доставка" in received[0].part("text/plain")


def test_a_reader_without_the_editor_role_cannot_draft_or_send_tests(client, demo_data):
    from django.contrib.auth.models import User

    from notify.roles import support_group_ensure

    reader = User.objects.create_user("sam", "sam@support.example", "pw", is_staff=True)
    reader.groups.add(support_group_ensure())
    client.force_login(reader)
    template = TemplateVersion.objects.filter(template__channel="email").first()
    assert client.get(url("preview", template.pk)).status_code == 200
    assert client.get(url("new_version", template.template_id)).status_code == 403
    assert client.post(url("send_test", template.pk)).status_code == 403
    assert client.post(url("publish", template.pk)).status_code == 403
