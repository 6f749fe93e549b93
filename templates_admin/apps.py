from typing import Any

from django.apps import AppConfig


def category_templates_problems(category: Any) -> dict[str, list[str]]:
    """The published templates a category's new settings would break (a template that
    uses `digest` on a channel no longer digested), as problems of `digest_windows`."""
    from templates_admin.services import published_templates_broken_by

    broken = published_templates_broken_by(
        category=category,
        schema=category.payload_schema or {},
        sample_payloads=category.sample_payloads or [],
    )
    found = [f"The published template {template} would break: {p[0]}" for template, p in broken]
    return {"digest_windows": found} if found else {}


class TemplatesAdminConfig(AppConfig):
    name = "templates_admin"
    verbose_name = "Templates"

    def ready(self) -> None:
        from notify.services import category_check_add

        # A category changed through the API must not break its published templates.
        category_check_add(category_templates_problems)
