"""Email over SMTP, through django-templated-mail (R-D1, R-T5).

Classification (R-D2): a recipient refused with 5xx or a 5xx at DATA is permanent;
4xx answers, disconnects, timeouts and refusals of our own sender or login are
transient (they are about our side or the relay, not about this message).
"""

from __future__ import annotations

import smtplib
from email.utils import make_msgid
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.core.mail import get_connection

from deliveries.channels.base import SendResult
from templates_admin.mail import VersionEmailMessage

if TYPE_CHECKING:
    from deliveries.models import Delivery
    from templates_admin.models import TemplateVersion


def classify_smtp_error(error: Exception) -> SendResult:
    """Map an smtplib/socket failure to a transient or permanent result."""
    if isinstance(error, smtplib.SMTPRecipientsRefused):
        answers = list(error.recipients.values())
        code = answers[0][0] if answers else 0
        text = "; ".join(_decode(message) for _, message in answers)
        permanent = bool(answers) and all(int(c) >= 500 for c, _ in answers)
        result = SendResult.permanent if permanent else SendResult.transient
        return result(status_code=str(code), response=text)
    if isinstance(error, smtplib.SMTPAuthenticationError | smtplib.SMTPSenderRefused):
        return SendResult.transient(
            status_code=str(error.smtp_code), response=_decode(error.smtp_error)
        )
    if isinstance(error, smtplib.SMTPResponseException):
        result = SendResult.permanent if error.smtp_code >= 500 else SendResult.transient
        return result(status_code=str(error.smtp_code), response=_decode(error.smtp_error))
    # Disconnects, connection refused, timeouts, DNS: the relay, not the message.
    return SendResult.transient(status_code=type(error).__name__, response=str(error))


def send(delivery: Delivery, version: TemplateVersion, context: dict[str, Any]) -> SendResult:
    """Render the version through templated-mail and hand it to the SMTP relay."""
    message_id = make_msgid(domain=settings.NOTIFY_EMAIL_MESSAGE_ID_DOMAIN)
    message = VersionEmailMessage(
        version=version,
        context=context,
        headers={"Message-ID": message_id},
        connection=get_connection(fail_silently=False),
    )
    message.render()  # a template error surfaces here, before any network call
    try:
        message.send(to=[delivery.target])
    except (smtplib.SMTPException, OSError) as error:
        return classify_smtp_error(error)
    return SendResult.delivered(provider_message_id=message_id, status_code="250")


def _decode(value: bytes | str) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)
