"""Email through django-templated-mail, fed from a template version (R-T5).

templated-mail renders a template's `subject`, `text_body` and `html_body` blocks into
one EmailMultiAlternatives. Here the template is composed from the version's fields
rather than read from disk: subject and text outside autoescape, HTML inside it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from templated_mail.mail import BaseEmailMessage

if TYPE_CHECKING:
    from templates_admin.models import TemplateVersion


def compose_email_source(*, subject: str, text_body: str, html_body: str) -> str:
    """One Django template with the three blocks templated-mail looks for."""
    return (
        "{% block subject %}{% autoescape off %}" + subject + "{% endautoescape %}{% endblock %}"
        "{% block text_body %}{% autoescape off %}"
        + text_body
        + "{% endautoescape %}{% endblock %}"
        "{% block html_body %}" + html_body + "{% endblock %}"
    )


class VersionEmailMessage(BaseEmailMessage):
    """A templated-mail message whose template is a published TemplateVersion."""

    def __init__(self, *, version: TemplateVersion, context: dict[str, Any], **kwargs: Any) -> None:
        super().__init__(context=context, **kwargs)
        self.version = version
        self._rendered = False

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        # Only the caller's JSON context: templated-mail's extras (user, site) stay out.
        return dict(self.context)

    def render(self) -> None:
        """Fill subject, text and HTML from the version; idempotent (send() calls it too)."""
        if self._rendered:
            return
        from django.template.context import make_context

        from templates_admin.rendering import _HTML_ENGINE, html_to_text

        version = self.version
        source = compose_email_source(
            subject=version.subject, text_body=version.text_body, html_body=version.html_body
        )
        template = _HTML_ENGINE.from_string(source)
        context = make_context(self.get_context_data())
        with context.bind_template(template):
            for node in template.nodelist:
                self._process_node(node, context)
        if not self.body and self.html:
            self.body = html_to_text(self.html)
        self._attach_body()
        self._rendered = True
