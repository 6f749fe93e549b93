"""Translations that do not rot, as staff see them: the "outdated" marker in the template
list and on a template's page, PO export and import (drafts only), and the warning when a
published default-locale text uses a payload field another locale's does not."""

from __future__ import annotations

import io

import pytest
from babel.messages.pofile import read_po, write_po
from django.contrib.messages import get_messages
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from templates_admin.models import Template, TemplateVersion
from templates_admin.services import template_version_create, template_version_publish
from templates_admin.translation_files import PO_FILE_MAX_BYTES


def url(name: str, *args) -> str:
    return reverse(f"admin:templates_admin_template_{name}", args=args)


def slot(channel: str, locale: str, category: str = "order.shipped") -> Template:
    return Template.objects.get(category__key=category, channel=channel, locale=locale)


def publish_new(template: Template, **changes: str) -> TemplateVersion:
    """A new published version of `template`: its published text with `changes`."""
    current = template.published_version
    fields = {name: getattr(current, name) for name in ("title", "body", "url")}
    version = template_version_create(template=template, fields={**fields, **changes})
    template_version_publish(version=version)
    return version


def changelist(client, **query) -> str:
    response = client.get(url("changelist"), query)
    assert response.status_code == 200
    return response.content.decode()


def test_a_locale_older_than_the_default_locales_newer_publish_shows_as_outdated(
    editor_client, demo_data
):
    # seed_demo published each ru text after its en text: nothing is outdated yet.
    assert "older than en" not in changelist(editor_client)
    publish_new(slot("inapp", "en"), title="Order {{ order_number }} left the warehouse")
    ru_inapp, ru_webpush = slot("inapp", "ru"), slot("webpush", "ru")

    outdated = changelist(editor_client, outdated="yes")
    assert "older than en v2" in outdated
    assert url("change", ru_inapp.pk) in outdated
    assert url("change", ru_webpush.pk) not in outdated  # its en text did not change
    assert url("change", slot("inapp", "en").pk) not in outdated  # the source itself
    assert url("change", ru_webpush.pk) in changelist(editor_client, outdated="no")

    page = editor_client.get(url("change", ru_inapp.pk)).content.decode()
    assert "outdated-notice" in page and "en text has a newer published version" in page
    assert "v2, published" in page

    # A ru text published after the en one is up to date again.
    publish_new(ru_inapp, title="Заказ №{{ order_number }} покинул склад")
    assert url("change", ru_inapp.pk) not in changelist(editor_client, outdated="yes")
    page = editor_client.get(url("change", ru_inapp.pk)).content.decode()
    assert "outdated-notice" not in page


def _templates(key: str, count: int) -> None:
    """`count` templates of a new category, each with a published v1 and a draft v2."""
    from notify.models import Category

    category = Category.objects.create(
        key=key,
        payload_schema={"type": "object", "properties": {"name": {"type": "string"}}},
        sample_payloads=[{"name": "Ann"}],
    )
    for number in range(count):
        template = Template.objects.create(
            category=category, channel="inapp", locale="en" if number == 0 else f"l{number}"
        )
        version = template_version_create(template=template, fields={"title": "Hi {{ name }}"})
        template_version_publish(version=version)
        template_version_create(template=template, fields={"title": "Hello {{ name }}"})


def test_the_template_list_costs_the_same_queries_for_3_and_10_templates(editor_client, db):
    def queries_for_the_list(rows: int) -> int:
        with CaptureQueriesContext(connection) as captured:
            page = changelist(editor_client)
        assert page.count('<td class="field-latest">v2</td>') == rows
        return len(captured.captured_queries)

    changelist(editor_client)  # caches warmed (content types, the session)
    _templates("list.three", 3)
    three = queries_for_the_list(3)
    _templates("list.seven", 7)
    assert queries_for_the_list(10) == three


def _exported(client, *templates: Template) -> bytes:
    response = client.post(
        url("changelist"),
        {"action": "export_translations", "_selected_action": [t.pk for t in templates]},
    )
    assert response.status_code == 200
    assert response["Content-Disposition"] == 'attachment; filename="templates-ru.po"'
    return response.content


def test_export_writes_the_default_text_as_msgid_and_the_locales_as_msgstr(
    editor_client, demo_data, tmp_path
):
    content = _exported(editor_client, slot("inapp", "ru"), slot("email", "ru"))
    text = content.decode()
    assert 'msgctxt "order.shipped/inapp/title"' in text
    entries = {m.context: (m.id, m.string) for m in read_po(io.BytesIO(content)) if m.id}
    assert entries["order.shipped/inapp/title"] == (
        "Order {{ order_number }} is on its way",
        "Заказ №{{ order_number }} в пути",
    )
    assert entries["order.shipped/email/subject"] == (
        "Order {{ order_number }} has shipped",
        "Заказ №{{ order_number }} отправлен",
    )
    assert {context.rsplit("/", 1)[0] for context in entries} == {
        "order.shipped/inapp",
        "order.shipped/email",
    }

    out = tmp_path / "ru.po"
    call_command("templates_export", "--locale", "ru", "--out", str(out))
    everything = {m.context for m in read_po(io.BytesIO(out.read_bytes())) if m.id}
    assert "security.login_code/sms/body" in everything and entries.keys() <= everything


def _edited(content: bytes, changes: dict[str, str]) -> bytes:
    catalog = read_po(io.BytesIO(content))
    for message in catalog:
        if message.context in changes:
            message.string = changes[message.context]
    out = io.BytesIO()
    write_po(out, catalog)
    return out.getvalue()


def _upload(client, content: bytes):
    upload = SimpleUploadedFile("ru.po", content, content_type="text/x-gettext-translation")
    return client.post(url("import_translations"), {"file": upload, "locale": ""})


def test_import_drafts_only_changed_texts_reports_a_broken_one_and_publishes_nothing(
    editor_client, demo_data
):
    chosen = [slot(channel, "ru") for channel in ("inapp", "webpush", "email", "fcm")]
    published = {t.pk: t.published_version_id for t in chosen}
    edited = _edited(
        _exported(editor_client, *chosen),
        {
            "order.shipped/inapp/title": "Ваш заказ №{{ order_number }} в пути",
            "order.shipped/webpush/title": "Заказ {% if order_number %}№{{ order_number }}",
        },
    )
    response = _upload(editor_client, edited)
    assert response.status_code == 200
    page = response.content.decode()

    inapp = TemplateVersion.objects.get(template=slot("inapp", "ru"), number=2)
    assert inapp.title == "Ваш заказ №{{ order_number }} в пути"
    assert inapp.body == "Ожидаемая доставка — {{ delivery_date }}."  # the rest kept
    assert inapp.created_by.username == "editor"
    assert "order.shipped/webpush" in page and "Unclosed tag" in page
    assert "1 draft(s) created, none published." in page
    assert TemplateVersion.objects.filter(template__in=chosen).count() == len(chosen) + 1
    for template in Template.objects.filter(pk__in=published):
        assert template.published_version_id == published[template.pk]


def test_import_needs_the_draft_right_and_refuses_an_oversized_file(editor_client, db):
    from django.contrib.auth.models import User
    from django.test import Client

    reader = User.objects.create_user("reader", "reader@staff.example", "pw", is_staff=True)
    client = Client()
    client.force_login(reader)
    assert client.get(url("import_translations")).status_code == 403
    assert _upload(client, b'msgid ""\nmsgstr ""\n').status_code == 403

    response = _upload(editor_client, b"#" * (PO_FILE_MAX_BYTES + 1))
    assert "larger than" in response.content.decode()
    assert not TemplateVersion.objects.exists()


def test_a_new_language_through_the_commands_adds_its_templates_as_drafts(demo_data, tmp_path):
    from django.core.management.base import CommandError

    po = tmp_path / "de.po"
    call_command(
        "templates_export", "--locale", "de", "--category", "security.login_code", "--out", str(po)
    )
    exported = read_po(io.BytesIO(po.read_bytes()))
    assert str(exported.locale) == "de" and all(not m.string for m in exported if m.id)
    po.write_bytes(
        _edited(
            po.read_bytes(),
            {
                "security.login_code/sms/body": "Anmeldecode: {{ code }}",
                "security.login_code/email/subject": "Ihr Code: {{ kod }}",
                "security.login_code/email/html_body": "<p>{{ code }}</p>",
            },
        )
    )
    with pytest.raises(CommandError, match="1 draft"):
        call_command("templates_import", str(po))

    sms = slot("sms", "de", "security.login_code")
    assert sms.published_version is None
    assert sms.versions.get().body == "Anmeldecode: {{ code }}"
    # The refused email draft leaves no empty template behind.
    assert not Template.objects.filter(locale="de", channel="email").exists()


def test_publishing_a_default_text_with_a_new_payload_field_warns_about_other_locales(
    publisher_client, demo_data
):
    en = slot("inapp", "en")
    draft = template_version_create(
        template=en,
        fields={
            "title": "Order {{ order_number }}: {{ items_count }} items shipped",
            "body": "Expected delivery: {{ delivery_date }}.",
            "url": "/orders/{{ order_number }}",
        },
    )
    response = publisher_client.post(url("publish", draft.pk))
    assert response.status_code == 302
    shown = [(m.level_tag, str(m)) for m in get_messages(response.wsgi_request)]
    warnings = [text for level, text in shown if level == "warning"]
    assert len(warnings) == 1
    assert "ru v1 does not use items_count" in warnings[0]
    en.refresh_from_db()
    assert en.published_version == draft  # a warning, not a refusal
    assert "ru v1 does not use items_count" in publisher_client.get(response.url).content.decode()

    ru = slot("inapp", "ru")
    ru_draft = template_version_create(
        template=ru, fields={"title": "Заказ №{{ order_number }}", "url": "/orders/1"}
    )
    response = publisher_client.post(url("publish", ru_draft.pk))
    assert not [m for m in get_messages(response.wsgi_request) if m.level_tag == "warning"]
