"""The kept email session with a backend other than SMTP (the in-memory one a developer
may configure): every send goes out, not only the first."""

from __future__ import annotations

from django.core import mail
from django.core.mail import EmailMessage

from deliveries.channels.smtp import kept_session_close, send_on_kept_connection


class Message(EmailMessage):
    """An email sent as the channel sends its rendered messages: `send(to=[...])`, the
    signature of django-templated-mail's messages."""

    def send(self, to: list[str], fail_silently: bool = False) -> int:
        self.to = to
        return super().send(fail_silently)


def test_a_backend_without_a_connection_sends_every_message_on_its_kept_session(settings):
    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    kept_session_close()
    mail.outbox = []
    try:
        for number in range(2):
            message = Message(f"hello {number}", "body", "noreply@example.com")
            send_on_kept_connection(message, to="pat@example.com")
    finally:
        kept_session_close()
    assert [m.subject for m in mail.outbox] == ["hello 0", "hello 1"]
