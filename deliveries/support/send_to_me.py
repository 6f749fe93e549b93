""" "Send test to me" for every channel, and the test email that seed lists reuse.

Email goes straight to the staff account's own address (`request.user.email`), through
the email channel with a transient delivery: an unsaved notification and delivery that
name no recipient, handed to the channel's `send` in the request. Nothing is written, so
a test email needs no recipient set up first, and it is in no count, report, campaign
progress, metrics rollup, analytics event or producer-visible list; the page shows the
relay's or provider's answer. (The alternative, an internal recipient per staff member
under a reserved user id, would have had to be kept out of the API, every audience and
every count one by one.) It is the email a recipient would get — the same rendering and
footers, through SMTP or the email service provider as configured — with "[Test] " before
its subject; its footer links name no recipient, so they open nothing.

Which recipient is "me" for the other channels: the one whose email equals the staff
account's email (case aside); exactly one must match, and the admin says what to do when
none or several do. The version itself (a draft too) is pinned on the delivery, so what
is tested is what the author is looking at. In-app is written at once, in the request,
its title starting with "[Test] " (a test seal says it is one); push and SMS are queued
for the workers and sent as users would get them, to the recipient's registered devices
of that kind or their phone. Such a send skips the gate (preferences, quiet hours, the
daily marketing cap: it is not counted against the cap) and nothing else: the sender
checks the test seal as it checks the gate's. Each is marked by a `TemplateTestSend` row
(who, which version) on a notification of the producer TEST_PRODUCER, and never routed
(it is created routed), so no sweeper touches it.
"""

from __future__ import annotations

import copy
import logging
import uuid
from collections.abc import Sequence
from typing import Any

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.template import TemplateSyntaxError
from django.utils import timezone

from deliveries.channels import provider_for
from deliveries.channels.base import SendResult
from deliveries.channels.inapp import TEST_TITLE_PREFIX
from deliveries.models import AttemptOutcome, Delivery, DeliveryStatus, TemplateTestSend
from deliveries.pipeline.attempt import deliveries_attempt
from deliveries.pipeline.delivery_rows import delivery_deadline
from deliveries.pipeline.enqueue import delivery_enqueue
from deliveries.selectors import push_targets_by_channel
from notify.models import PUSH_CHANNELS, Channel, Notification, Producer, Recipient
from preferences.gate import address_targets, test_send_seal
from templates_admin.models import TemplateVersion
from templates_admin.rendering import build_context
from templates_admin.send_to_me import SendTestRefused, SendTestRequest, send_test_register

logger = logging.getLogger(__name__)

TEST_PRODUCER = "template-test-sends"
# Before the subject of every test email (the in-app title's mark, so both read alike).
TEST_SUBJECT_PREFIX = TEST_TITLE_PREFIX
# The user id a test email's templates see as `recipient.user_id`: it names nobody.
TEST_USER_ID = "test"
_WHERE = {
    Channel.INAPP: "the feed",
    Channel.SMS: "the phone",
    Channel.WEBPUSH: "the Web Push devices",
    Channel.FCM: "the FCM devices",
}
_MISSING = {
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
    """Send the version to the staff member on its channel — email to the staff account's
    own address, the other channels to their linked recipient; returns what was done, in
    words, or raises SendTestRefused."""
    version = request.version
    channel = version.template.channel
    if channel not in settings.NOTIFY_CHANNELS_ENABLED:
        raise SendTestRefused(f"The {channel} channel is not enabled on this platform.")
    if channel == Channel.EMAIL:
        return _email_to_staff(request)
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
        if channel != Channel.INAPP:
            queued = [(row.pk, row.queue) for row in rows]
            owner = (recipient.pk, notification.pk)
            transaction.on_commit(lambda: _start(queued, channel, owner))
    if channel == Channel.INAPP:  # sent here, so it is in the feed when the page answers
        deliveries_attempt(delivery_ids=[row.pk for row in rows])
    verb = "written to" if channel == Channel.INAPP else "queued for"
    return f"Test {channel} {verb} {_WHERE[channel]} of recipient {recipient.user_id}."


def _email_to_staff(request: SendTestRequest) -> str:
    """The test email to the staff account's own address, in the request."""
    address = getattr(request.user, "email", "")
    if not address:
        raise SendTestRefused("Your staff account has no email address; add one first.")
    [(_, result)] = test_emails_send(
        version=request.version,
        payload=request.payload,
        locale=request.locale,
        addresses=[address],
        requested_by=request.user,
    )
    if result.outcome == AttemptOutcome.DELIVERED:
        return f"Test email sent to {address}."
    raise SendTestRefused(f"The test email was not sent: {result_words(result)}")


def test_emails_send(
    *,
    version: TemplateVersion,
    payload: dict[str, Any],
    locale: str,
    addresses: Sequence[str],
    requested_by: AbstractBaseUser,
) -> list[tuple[str, SendResult]]:
    """Send the version as a test email to each address, one after another on one relay or
    provider session opened and closed here (a web thread keeps none); each address with
    the channel's answer. Nothing is written (see the module's docstring)."""
    email = provider_for(Channel.EMAIL)
    marked = copy.copy(version)  # rendering caches by id and source: the mark is seen
    marked.subject = TEST_SUBJECT_PREFIX + version.subject
    context = build_context(
        payload,
        recipient={
            "user_id": TEST_USER_ID,
            "locale": locale,
            "timezone": settings.NOTIFY_DEFAULT_TIMEZONE,
        },
    )
    notification = Notification(category=version.template.category, payload=payload)
    answers = []
    email.sessions_close()  # type: ignore[attr-defined]
    try:
        for address in addresses:
            delivery = Delivery(notification=notification, channel=Channel.EMAIL, target=address)
            answers.append((address, _email_send(email, delivery, marked, context)))
    finally:
        email.sessions_close()  # type: ignore[attr-defined]
    logger.info(
        "test email of template version %s by %s: %s",
        version.pk,
        requested_by.get_username(),
        ", ".join(f"{address} {result.outcome}" for address, result in answers),
    )
    return answers


def _email_send(email: Any, delivery: Delivery, version: TemplateVersion, context) -> SendResult:
    """One call of the email channel; a template that does not render (a draft with an
    error, a render over its bounds: RenderLimitExceeded is a TemplateSyntaxError) is its
    refusal, in words."""
    try:
        return email.send(delivery, version, context)
    except TemplateSyntaxError as error:
        return SendResult.permanent(response=f"template error: {error}")


def result_words(result: SendResult) -> str:
    """A refusal as the page shows it: the provider's code and text, as a delivery's
    last error reads."""
    return f"{result.status_code} {result.response}".strip() or str(result.outcome)


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
