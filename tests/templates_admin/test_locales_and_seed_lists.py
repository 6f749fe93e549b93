"""Marketing without a developer: an editor adds a template for a new locale, keeps seed
lists of colleagues, and sends a draft to one (each member gets it over SMTP, marked as a
test, recorded nowhere); support, who only reads, can do none of it."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.contrib.messages import get_messages
from django.urls import reverse

from campaigns.models import SEED_LIST_MAX_MEMBERS, SeedList
from deliveries.models import Delivery
from notify.models import Category, Notification
from notify.roles import support_group_ensure
from templates_admin.models import Template
from templates_admin.services import template_version_draft
from tests.templates_admin.conftest import published_template

ADD_TEMPLATE = "/admin/templates_admin/template/add/"
SEED_LISTS = "/admin/campaigns/seedlist/"
COLLEAGUES = ["ann@staff.example", "Bob@Staff.Example", "cy@staff.example"]


@pytest.fixture
def support_client(client, demo_data):
    user = User.objects.create_user("sue", email="sue@staff.example", is_staff=True)
    user.groups.add(support_group_ensure())
    client.force_login(user)
    return client


@pytest.fixture
def mail_to(smtp, settings):
    """Email goes over the real SMTP backend to the peer."""
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST, settings.EMAIL_PORT = "127.0.0.1", smtp.port
    return smtp


def new_locale_form() -> dict:
    category = Category.objects.get(key="order.shipped")
    return {
        "category": category.pk,
        "channel": "email",
        "locale": "de",
        # The versions inline's management form (a new template has none).
        "versions-TOTAL_FORMS": "0",
        "versions-INITIAL_FORMS": "0",
    }


def test_an_editor_adds_a_template_for_a_new_locale_and_goes_on_to_its_first_draft(
    editor_client, demo_data
):
    assert editor_client.get(ADD_TEMPLATE).status_code == 200

    response = editor_client.post(ADD_TEMPLATE, new_locale_form())

    assert response.status_code == 302, response.content
    template = Template.objects.get(category__key="order.shipped", channel="email", locale="de")
    assert template.published_version is None
    assert response.url == reverse("admin:templates_admin_template_new_version", args=[template.pk])
    assert editor_client.get(response.url).status_code == 200


def test_support_cannot_add_a_template(support_client):
    assert support_client.get(ADD_TEMPLATE).status_code == 403
    assert support_client.post(ADD_TEMPLATE, new_locale_form()).status_code == 403
    assert not Template.objects.filter(locale="de").exists()


def test_an_editor_cannot_delete_a_template(editor_client, order_template):
    url = reverse("admin:templates_admin_template_delete", args=[order_template.pk])

    assert editor_client.post(url, {"post": "yes"}).status_code == 403
    assert Template.objects.filter(pk=order_template.pk).exists()


def test_an_editor_keeps_a_seed_list_of_valid_addresses_bounded_in_count(editor_client, demo_data):
    add = SEED_LISTS + "add/"
    too_many = "\n".join(f"p{i}@staff.example" for i in range(SEED_LIST_MAX_MEMBERS + 1))

    refused = editor_client.post(add, {"name": "QA", "addresses": too_many})
    bad = editor_client.post(add, {"name": "QA", "addresses": "ann@staff.example\nnot-mail"})
    kept = editor_client.post(add, {"name": "QA", "addresses": "\n".join([*COLLEAGUES, ""])})

    assert refused.status_code == bad.status_code == 200  # the form again, with the error
    assert f"at most {SEED_LIST_MAX_MEMBERS} addresses" in refused.content.decode()
    assert "&#x27;not-mail&#x27; is not an email address." in bad.content.decode()
    assert kept.status_code == 302
    assert SeedList.objects.get(name="QA").addresses == COLLEAGUES


def test_a_draft_sent_to_a_seed_list_reaches_every_member_marked_as_a_test(
    editor_client, editor, demo_data, mail_to
):
    seeds = SeedList.objects.create(name="QA", addresses=COLLEAGUES)
    draft = template_version_draft(
        template=published_template("order.shipped", "email"),
        fields={"subject": "Shipped: {{ order_number }}", "html_body": "<p>On its way.</p>"},
        created_by=editor,
    )
    preview = reverse("admin:templates_admin_template_preview", args=[draft.pk])
    send = reverse("admin:campaigns_seedlist_send_version", args=[draft.pk])
    assert send in editor_client.get(preview).content.decode()  # the button

    response = editor_client.post(send, {"seed_list": seeds.pk})

    assert response.status_code == 302 and response.url == preview
    assert [str(m) for m in get_messages(response.wsgi_request)] == [
        "Test email sent to 3 of seed list 'QA'."
    ]
    received = {mail.rcpt_tos[0]: mail.subject for mail in mail_to.received}
    # The draft, rendered with the category's first sample payload.
    assert received == {address: "[Test] Shipped: A-1001" for address in COLLEAGUES}
    assert not Notification.objects.exists() and not Delivery.objects.exists()


def test_a_seed_list_refused_address_is_named_and_the_others_still_get_it(
    editor_client, demo_data, mail_to
):
    mail_to.handler.rcpt_by_address["Bob@Staff.Example"] = "550 5.1.1 No such user"
    seeds = SeedList.objects.create(name="QA", addresses=COLLEAGUES)
    version = published_template("order.shipped", "email").published_version
    send = reverse("admin:campaigns_seedlist_send_version", args=[version.pk])

    response = editor_client.post(send, {"seed_list": seeds.pk})

    [said] = [str(m) for m in get_messages(response.wsgi_request)]
    assert said.startswith("Test email sent to 2 of seed list 'QA'. Not sent: Bob@Staff.Example")
    assert sorted(m.rcpt_tos[0] for m in mail_to.received) == [
        "ann@staff.example",
        "cy@staff.example",
    ]


def test_without_the_permission_there_is_no_seed_list_button_and_no_send(support_client, mail_to):
    seeds = SeedList.objects.create(name="QA", addresses=COLLEAGUES)
    version = published_template("order.shipped", "email").published_version
    preview = reverse("admin:templates_admin_template_preview", args=[version.pk])
    send = reverse("admin:campaigns_seedlist_send_version", args=[version.pk])

    assert support_client.get(preview).status_code == 200
    assert send not in support_client.get(preview).content.decode()
    assert support_client.get(send).status_code == 403
    assert support_client.post(send, {"seed_list": seeds.pk}).status_code == 403
    assert not mail_to.received
