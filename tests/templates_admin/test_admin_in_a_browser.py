"""An editor and a publisher in a real browser (Debian's Chromium through Playwright)."""

from __future__ import annotations

from templates_admin.models import Template, TemplatePublication, TemplateVersion
from tests.conftest import screenshot


def login(page, username: str) -> None:
    page.context.clear_cookies()
    page.goto(f"{page.base_url}/admin/login/?next=/admin/")
    page.fill("#id_username", username)
    page.fill("#id_password", f"pw-{username}")
    page.click("input[type=submit]")
    page.wait_for_selector("#site-name")


def test_an_editor_drafts_and_previews_in_ru_and_en_and_only_a_publisher_publishes(
    transactional_db, browser_page, demo_data, editor, publisher
):
    page = browser_page
    template = Template.objects.get(category__key="order.shipped", channel="inapp", locale="en")

    login(page, "editor")
    page.goto(f"{page.base_url}/admin/templates_admin/template/{template.pk}/change/")
    page.click("text=Edit (new draft)")
    page.fill("#id_body", "Arrives {{ delivery_date|date }} at {{ order_numbr }}")
    page.click("input[value='Save draft']")
    assert "unknown variable “order_numbr”" in page.inner_text(".errorlist")
    screenshot(page, "templates-draft-refused")

    page.fill("#id_body", 'Arrives {{ delivery_date|date:"long" }}.')
    page.click("input[value='Save draft']")
    page.wait_for_selector("#preview-form")
    assert "Arrives December 3, 2026." in page.inner_text("#content")
    screenshot(page, "templates-preview-en")

    page.fill("input[name=locale]", "ru")
    page.click("#preview-form input[type=submit]")
    page.wait_for_selector("text=3 декабря 2026")
    screenshot(page, "templates-preview-ru")
    assert page.query_selector("#publish-button") is None
    assert "needs the “publish template version” permission" in page.inner_text("#content")
    template.refresh_from_db()
    assert template.published_version.number == 1

    login(page, "publisher")
    v2 = TemplateVersion.objects.get(template=template, number=2)
    page.goto(f"{page.base_url}/admin/templates_admin/template/version/{v2.pk}/preview/")
    page.click("#publish-button")
    page.wait_for_selector("text=Publish log")
    screenshot(page, "templates-published-by-publisher")
    template.refresh_from_db()
    assert template.published_version == v2
    assert TemplatePublication.objects.get(version=v2).published_by == publisher
