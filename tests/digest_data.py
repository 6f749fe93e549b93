"""A category that digests email (comments), its templates, and a helper to make events."""

from __future__ import annotations

import uuid

from notify.models import Category, Notification, Producer, Recipient
from templates_admin.models import Template
from templates_admin.services import template_version_draft, template_version_publish

COMMENT_SCHEMA = {
    "type": "object",
    "properties": {
        "thread_id": {"type": "string"},
        "comment_id": {"type": "string"},
        "text": {"type": "string"},
    },
    "required": ["thread_id", "comment_id", "text"],
}
COMMENT_SAMPLES = [
    {"thread_id": "t1", "comment_id": "c1", "text": "First!"},
    {"thread_id": "t1", "comment_id": "c2", "text": "Agreed."},
]
DIGEST_EMAIL = {
    "subject": "{{ digest.count }} new comments",
    "html_body": "<ul>{% for event in digest.events %}<li>[{{ event.payload.comment_id }}] "
    "{{ event.payload.text }}</li>{% endfor %}</ul>",
    "text_body": "{% for event in digest.events %}[{{ event.payload.comment_id }}] "
    "{% endfor %}from {{ digest.first_at }} to {{ digest.last_at }}",
}
ONE_EMAIL = {
    "subject": "New comment [{{ comment_id }}]",
    "html_body": "<p>[{{ comment_id }}] {{ text }}</p>",
    "text_body": "[{{ comment_id }}] {{ text }}",
}
INAPP = {"title": "Comment [{{ comment_id }}]", "body": "{{ text }}", "url": ""}


def comment_category(
    key: str = "comment.posted", *, email: dict | None = None, **fields: object
) -> Category:
    """A comments category on in-app and email, its templates published (validated as
    an admin save would validate them)."""
    category = Category.objects.create(
        key=key,
        payload_schema=COMMENT_SCHEMA,
        sample_payloads=COMMENT_SAMPLES,
        default_channels=["inapp", "email"],
        **fields,
    )
    digested = category.digest_window_for("email") is not None
    for channel, texts in (
        ("inapp", INAPP),
        ("email", email or (DIGEST_EMAIL if digested else ONE_EMAIL)),
    ):
        template = Template.objects.create(category=category, channel=channel, locale="en")
        template_version_publish(version=template_version_draft(template=template, fields=texts))
    return category


def comment_event(
    category: Category, recipient: Recipient, number: int, *, thread: str = "t1", **extra
) -> Notification:
    """A stored (not yet routed) comment notification, as intake would make it."""
    producer, _ = Producer.objects.get_or_create(name="comments")
    return Notification.objects.create(
        producer=producer,
        event_id=extra.pop("event_id", f"comment-{uuid.uuid4()}"),
        recipient=recipient,
        category=category,
        payload={"thread_id": thread, "comment_id": f"c{number}", "text": f"comment {number}"},
        channels=[],
        fingerprint=str(uuid.uuid4()),
        **extra,
    )
