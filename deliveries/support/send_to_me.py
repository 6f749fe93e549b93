""" "Send test to me" for every channel: the version goes to the staff member through
the real pipeline, under a test seal instead of the gate's.

Which recipient is "me": the one whose email equals the staff account's email (case
aside). Exactly one must match; the admin says what to do when none or several do. The
version itself (a draft too) is pinned on the delivery, so what is tested is what the
author is looking at. In-app and email are sent at once, in the request, through the
attempt every send takes: the in-app channel starts its title with "[Test] " (a test
seal says it is one), so a test never passes for a real notification in the feed; the
email is the one the recipient would get (the same footers, through SMTP or the email
service provider as configured), and the admin shows the provider's refusal when there
is one. Push and SMS are queued for the workers and sent as users would get them, to
the recipient's registered devices of that kind or their phone.

A test send skips the gate (preferences, quiet hours, the daily marketing cap: it is
not counted against the cap) and nothing else: the sender checks the test seal as it
checks the gate's, and the provider's breaker and rate limits apply. Each is marked by a
`TemplateTestSend` row (who, which version) on a notification of the producer
TEST_PRODUCER, and never routed (it is created routed), so no sweeper touches it.
"""

from __future__ import annotations

import uuid

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.utils import timezone

from deliveries.channels import provider_for
from deliveries.models import Delivery, DeliveryStatus, TemplateTestSend
from deliveries.pipeline.attempt import deliveries_attempt
from deliveries.pipeline.enqueue import delivery_enqueue
from deliveries.pipeline.routing import delivery_deadline
from deliveries.selectors import push_targets_by_channel
from notify.models import PUSH_CHANNELS, Channel, Notification, Producer, Recipient
from preferences.gate import address_targets, test_send_seal
from templates_admin.send_to_me import SendTestRefused, SendTestRequest, send_test_register

TEST_PRODUCER = "template-test-sends"
# Sent in the request (so the page can say what happened), not queued for the workers.
_SENT_AT_ONCE = (Channel.INAPP, Channel.EMAIL)
_WHERE = {
    Channel.INAPP: "the feed",
    Channel.SMS: "the phone",
    Channel.WEBPUSH: "the Web Push devices",
    Channel.FCM: "the FCM devices",
}
_MISSING = {
    Channel.EMAIL: "no email address",
    Channel.SMS: "no phone number",
    Channel.WEBPUSH: "no registered Web Push device",
    Channel.FCM: "no registered FCM device",
}


def staff_recipient(*, user: AbstractBaseUser) -> Recipient:
    """The recipient linked to a staff account: the one whose email is the account's."""
    email = getattr(user, "email", "")
    if not email:
        raise SendTestRefused("Your staff account has no email address; add one first.")
    found = list(Recipient.objects.filter(email__iexact=email).order_by("pk")[:2])
    if not found:
        raise SendTestRefused(
            f"No recipient has your staff email ({email}): register yourself as a user "
            "with that email (PUT /v1/users/{user_id}) to receive test sends."
        )
    if len(found) > 1:
        raise SendTestRefused(
            f"Several recipients have your staff email ({email}); keep it on one only."
        )
    return found[0]


def template_version_send_to_staff(request: SendTestRequest) -> str:
    """Send the version to the staff member's recipient on its channel; returns what was
    done, in words, or raises SendTestRefused."""
    version = request.version
    channel = version.template.channel
    if channel not in settings.NOTIFY_CHANNELS_ENABLED:
        raise SendTestRefused(f"The {channel} channel is not enabled on this platform.")
    recipient = staff_recipient(user=request.user)
    if channel in PUSH_CHANNELS:
        targets = push_targets_by_channel(recipient_id=recipient.pk, channels=[channel])
        targets = targets.get(channel, [])
    else:
        targets = address_targets(channel, recipient)
    if not targets:
        raise SendTestRefused(f"Recipient {recipient.user_id} has {_MISSING[channel]}.")
    now = timezone.now()
    with transaction.atomic():
        notification = Notification.objects.create(
            producer=Producer.objects.get_or_create(name=TEST_PRODUCER)[0],
            event_id=f"test-send:{uuid.uuid4()}",
            recipient=recipient,
            category=version.template.category,
            payload=request.payload,
            channels=[channel],
            fingerprint="test-send",
            routed_at=now,  # never routed: the gate is not asked
        )
        TemplateTestSend.objects.create(
            notification=notification, version=version, requested_by=request.user
        )
        rows = Delivery.objects.bulk_create(
            _delivery(notification, channel, target, version, now) for target in targets
        )
        if channel not in _SENT_AT_ONCE:
            queued = [(row.pk, row.queue) for row in rows]
            owner = (recipient.pk, notification.pk)
            transaction.on_commit(lambda: _start(queued, channel, owner))
    if channel == Channel.EMAIL:
        return _email_send(rows[0])
    if channel == Channel.INAPP:  # sent here, so it is in the feed when the page answers
        deliveries_attempt(delivery_ids=[row.pk for row in rows])
    verb = "written to" if channel == Channel.INAPP else "queued for"
    return f"Test {channel} {verb} {_WHERE[channel]} of recipient {recipient.user_id}."


def _email_send(delivery: Delivery) -> str:
    """One attempt at the test email, here; what the relay or provider said, in words."""
    email = provider_for(Channel.EMAIL)
    # A web thread sends rarely: a fresh SMTP or provider session each time, none kept.
    email.sessions_close()  # type: ignore[attr-defined]
    try:
        deliveries_attempt(delivery_ids=[delivery.pk])
    finally:
        email.sessions_close()  # type: ignore[attr-defined]
    delivery.refresh_from_db(fields=["status", "last_error"])
    if delivery.status == DeliveryStatus.DELIVERED:
        return f"Test email sent to {delivery.target}."
    why = delivery.last_error or delivery.get_status_display()
    later = " (it will be tried again)" if _will_retry(delivery.status) else ""
    raise SendTestRefused(f"The test email was not sent: {why}{later}")


def _will_retry(status: str) -> bool:
    """The attempt left the delivery to the workers (a transient failure, a breaker)."""
    return status in (DeliveryStatus.QUEUED, DeliveryStatus.RETRYING)


def _delivery(notification, channel, target, version, now) -> Delivery:
    return Delivery(
        notification=notification,
        channel=channel,
        target=target,
        queue=notification.category.queue,
        status=DeliveryStatus.QUEUED,
        next_attempt_at=now,
        deadline=delivery_deadline(notification, channel),
        enqueued_at=now,
        template_version=version,
        gate_seal=test_send_seal(notification_id=notification.pk, channel=channel, target=target),
    )


def _start(queued: list[tuple[int, str]], channel: str, owner: tuple[int, object]) -> None:
    for delivery_id, queue in queued:
        delivery_enqueue(
            delivery_id=delivery_id,
            channel=channel,
            queue=queue,
            push_owner=owner,
            mark_enqueued=False,
        )


def send_to_me_register() -> None:
    """Give the template admin its "Send test to me" for every channel; called as
    deliveries' admin loads."""
    for channel in (Channel.INAPP, Channel.EMAIL, Channel.SMS, Channel.WEBPUSH, Channel.FCM):
        send_test_register(channel, template_version_send_to_staff)
