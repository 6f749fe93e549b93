"""Email through django-templated-mail, fed from a template version.

templated-mail normally renders a disk template's `subject`, `text_body` and
`html_body` blocks into one EmailMultiAlternatives. Here the three parts come from the
version's fields instead, each rendered by the restricted engines in `fields`:
subject and text without autoescape, HTML with it. Rendering the fields separately
(rather than splicing them into one `{% block %}` template) means an author's text can
never close or open a block of its own.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.core.mail.message import make_msgid
from django.core.mail.utils import DNS_NAME
from templated_mail.mail import BaseEmailMessage

from templates_admin.fields import html_to_text, render_field
from templates_admin.mime import alternative_bytes

if TYPE_CHECKING:
    from templates_admin.models import TemplateVersion


class VersionEmailMessage(BaseEmailMessage):
    """A templated-mail message whose template is a TemplateVersion."""

    def __init__(
        self,
        *,
        version: TemplateVersion,
        context: dict[str, Any],
        locale: str | None = None,
        timezone: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(context=context, **kwargs)
        self.version = version
        self.locale = locale
        self.timezone = timezone
        self._rendered = False

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        # Only the caller's JSON context: templated-mail's extras (user, site) stay out.
        return dict(self.context)

    def render(self) -> None:
        """Fill subject, text and HTML from the version; idempotent (send() calls it too)."""
        if self._rendered:
            return
        context = self.get_context_data()
        options = {"locale": self.locale, "timezone": self.timezone}
        # A subject is one line: newlines in it would break the header.
        subject = render_field(self.version, "subject", context, **options)
        self.subject = " ".join(subject.split())
        self.body = render_field(self.version, "text_body", context, **options)
        self.html = render_field(self.version, "html_body", context, html=True, **options)
        if not self.body and self.html:
            self.body = html_to_text(self.html)
        self._attach_body()
        self._rendered = True

    def message(self) -> Any:
        """Django's MIME message, with the multipart boundary chosen here. Left unset,
        Python's generator picks one by searching the whole encoded text with a regular
        expression compiled afresh for each message: a tenth of a campaign sender's CPU.
        A random boundary that occurs in no part is as safe (encoded parts cannot hold
        one: quoted-printable escapes its `=`, base64 has none inside)."""
        message = super().message()
        if message.is_multipart():
            boundary = f"===============notify{uuid.uuid4().hex}=="
            texts = [self.body or "", *(str(content) for content, _ in self.alternatives)]
            if not any(boundary in text for text in texts):
                message.set_boundary(boundary)
        return message

    def wire_bytes(self, *, from_header: str, to_header: str) -> bytes | None:
        """The message as it goes to the relay, written directly (templates_admin/mime.py)
        when it has the usual shape — one recipient, a text and an HTML part, UTF-8, no
        attachment, Cc or Reply-To — else None (then Django builds it). The addresses are
        the envelope's, as the SMTP backend sanitized them."""
        self.render()
        shaped = (
            len(self.to) == 1
            and not (self.cc or self.bcc or self.reply_to or self.attachments)
            and self.content_subtype == "plain"
            and [mimetype for _, mimetype in self.alternatives] == ["text/html"]
            and (self.encoding or settings.DEFAULT_CHARSET).lower() in {"utf-8", "utf8"}
        )
        if not shaped:
            return None
        headers = dict(self.extra_headers)
        if not any(name.lower() == "message-id" for name in headers):
            headers["Message-ID"] = make_msgid(domain=DNS_NAME)
        return alternative_bytes(
            subject=self.subject,
            from_header=from_header,
            to_header=to_header,
            text=self.body,
            html=str(self.alternatives[0][0]),
            headers=headers,
            local_time=settings.EMAIL_USE_LOCALTIME,
        )
