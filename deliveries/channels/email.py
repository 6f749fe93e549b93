"""Email over SMTP, through django-templated-mail (or, with NOTIFY_EMAIL_ESP set, through
an email service provider's API: the esp package, imported only then, and anymail with
it; both send what `message_build` makes).

Classification: a recipient refused with 5xx (a hard bounce: the address is suppressed)
or a 5xx at DATA is permanent; 4xx answers, disconnects, timeouts and refusals of our own
sender or login are transient (about our side or the relay, not about this message). The
whole call ends at NOTIFY_CALL_DEADLINE_SMTP (a transient `timeout`); smtp.py keeps the session.
"""

from __future__ import annotations

import smtplib
import socket
import sys
from email.utils import make_msgid
from importlib import import_module
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.utils.html import escape

from deliveries.channels.base import SendResult
from deliveries.channels.smtp import kept_session_close, send_on_kept_connection
from deliveries.channels.verp import verp_address
from egress.deadline import call_deadline
from preferences.footer import FooterWords, email_footer_words
from preferences.tokens import preference_center_url, unsubscribe_url
from templates_admin.mail import VersionEmailMessage

if TYPE_CHECKING:
    from deliveries.models import Delivery
    from templates_admin.models import TemplateVersion

# Email through a provider's API: loaded by name on the first such send, so SMTP-only
# processes never import anymail.
ESP_PACKAGE = "deliveries.channels.esp"


def classify_smtp_error(error: Exception) -> SendResult:
    """Map an smtplib/socket failure to a transient or permanent result."""
    if isinstance(error, smtplib.SMTPRecipientsRefused):
        answers = list(error.recipients.values())
        code = answers[0][0] if answers else 0
        text = "; ".join(_decode(message) for _, message in answers)
        permanent = bool(answers) and all(int(c) >= 500 for c, _ in answers)
        if permanent:  # the recipient's mailbox refused for good: a hard bounce
            return SendResult.permanent(status_code=str(code), response=text, hard_bounce=True)
        return SendResult.transient(status_code=str(code), response=text)
    if isinstance(error, smtplib.SMTPAuthenticationError | smtplib.SMTPSenderRefused):
        return SendResult.transient(
            status_code=str(error.smtp_code), response=_decode(error.smtp_error)
        )
    if isinstance(error, smtplib.SMTPResponseException):
        result = SendResult.permanent if error.smtp_code >= 500 else SendResult.transient
        return result(status_code=str(error.smtp_code), response=_decode(error.smtp_error))
    # Disconnects, connection refused, timeouts, DNS: the relay, not the message. Unknown
    # whether the relay took it, unless no connection was ever made.
    never = isinstance(error, ConnectionRefusedError | socket.gaierror | smtplib.SMTPConnectError)
    return SendResult.transient(
        status_code=type(error).__name__, response=str(error), unknown=not never
    )


def send(
    delivery: Delivery,
    version: TemplateVersion,
    context: dict[str, Any],
    *,
    via: str | None = None,
) -> SendResult:
    """Render the version through templated-mail and hand it to the SMTP relay, or to the
    email service provider's API when NOTIFY_EMAIL_ESP names one (the esp package).
    `via`: this provider instead (`smtp` or an ESP), when the channel fails over between
    several (NOTIFY_EMAIL_PROVIDERS)."""
    esp_name = settings.NOTIFY_EMAIL_ESP if via is None else ("" if via == "smtp" else via)
    if esp_name:
        esp = import_module(ESP_PACKAGE)  # anymail and the provider's SDK load only here
        return esp.send(message_build(delivery, version, context), to=delivery.target, esp=esp_name)
    message_id = make_msgid(domain=settings.NOTIFY_EMAIL_MESSAGE_ID_DOMAIN)
    message = message_build(delivery, version, context, headers={"Message-ID": message_id})
    # Bounces go to the envelope sender: with a bounce domain, one that names this delivery.
    message.envelope_sender = verp_address(delivery.pk)
    deadline = settings.NOTIFY_PROVIDER_CALL_DEADLINES["smtp"]
    with call_deadline(deadline) as watch:
        try:
            send_on_kept_connection(message, to=delivery.target)
        except (smtplib.SMTPException, OSError) as error:
            if watch.expired:  # the relay dripped or stalled; its session is gone
                kept_session_close()
                return SendResult.transient(
                    status_code="timeout",
                    response=f"no complete answer within {deadline:g}s (the call's deadline)",
                    unknown=True,
                )
            return classify_smtp_error(error)
    if watch.expired:  # accepted just as the deadline fired: the session is cut, not reused
        kept_session_close()
    return SendResult.delivered(provider_message_id=message_id, status_code="250")


def sessions_close() -> None:
    """Close this thread's kept SMTP and ESP sessions (a web request's test send keeps none)."""
    kept_session_close()
    esp = sys.modules.get(ESP_PACKAGE)  # none kept unless an ESP send loaded it
    if esp is not None:
        esp.kept_session_close()


def message_build(
    delivery: Delivery,
    version: TemplateVersion,
    context: dict[str, Any],
    *,
    headers: dict[str, str] | None = None,
) -> VersionEmailMessage:
    """The rendered message for a delivery, whichever way it is sent: the version's
    subject and bodies, and for marketing the one-click unsubscribe headers and footer.
    A template error surfaces here, before any network call."""
    headers = dict(headers or {})
    unsubscribe = _unsubscribe_url(delivery)
    if unsubscribe:
        # RFC 8058 one-click: mail clients POST to it; the body carries the same link.
        context = {**context, "unsubscribe_url": unsubscribe}
        headers["List-Unsubscribe"] = f"<{unsubscribe}>"
        headers["List-Unsubscribe-Post"] = "List-Unsubscribe=One-Click"
    message = VersionEmailMessage(version=version, context=context, headers=headers)
    message.render()
    # The footer is in the person's language (the sender's context always names them).
    words = email_footer_words(locale=(context.get("recipient") or {}).get("locale"))
    if unsubscribe:
        _add_unsubscribe_footer(message, unsubscribe, words)
    # Every email, marketing or not, links the person's preference center (a signature,
    # no query: the hot path pays an HMAC).
    preferences = preference_center_url(recipient_id=delivery.notification.recipient_id)
    _add_preferences_footer(message, preferences, words, beside_unsubscribe=bool(unsubscribe))
    return message


def _unsubscribe_url(delivery: Delivery) -> str:
    """The one-click link for marketing email (this recipient, category, channel, and
    this message: an unsubscribe through it is counted for the message's campaign)."""
    notification = delivery.notification
    if not notification.category.marketing:
        return ""
    return unsubscribe_url(
        recipient_id=notification.recipient_id,
        category_id=notification.category_id,
        channel=delivery.channel,
        # A test send (a staff member's, a seed list's) is never saved: its link names
        # no message, and an unsubscribe through it counts for no campaign.
        delivery=(delivery.pk, delivery.accepted_at)
        if delivery.pk is not None and delivery.accepted_at is not None
        else None,
    )


def _add_unsubscribe_footer(message: VersionEmailMessage, url: str, words: FooterWords) -> None:
    """Put the link in the text and HTML bodies unless the template already shows it."""
    if url not in message.body:
        message.body = f"{message.body}\n\n{words.unsubscribe}: {url}"
    alternatives = list(message.alternatives)
    message.alternatives = []
    for content, mimetype in alternatives:
        if mimetype == "text/html" and url not in content:
            content = f'{content}\n<p><a href="{escape(url)}">{escape(words.unsubscribe)}</a></p>'
        message.attach_alternative(content, mimetype)


def _add_preferences_footer(
    message: VersionEmailMessage, url: str, words: FooterWords, *, beside_unsubscribe: bool
) -> None:
    """Put the preference-center link in the text and HTML bodies, after any unsubscribe."""
    gap = "\n" if beside_unsubscribe else "\n\n"
    message.body = f"{message.body}{gap}{words.preferences}: {url}"
    alternatives = list(message.alternatives)
    message.alternatives = []
    for content, mimetype in alternatives:
        if mimetype == "text/html":
            link = f'<a href="{escape(url)}">{escape(words.preferences)}</a>'
            content = f"{content}\n<p>{link}</p>"
        message.attach_alternative(content, mimetype)


def _decode(value: bytes | str) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)
