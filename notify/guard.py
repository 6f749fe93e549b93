"""What keeps producers (teams) from reaching each other's people and categories.

Recipients are shared by default: any producer's key with `recipients:write` may change a
person's contact data, and every change of an email or phone is recorded (who, when, old
and new value as keyed hashes) on the support timeline. With NOTIFY_RECIPIENTS_OWNED a
producer reaches only the recipients it registered, or was granted in admin: every
person-level operation of its keys (contact data, tokens, preferences, devices, feed,
stream, erasure of a registered person) is refused on anyone else's. See docs/producers.md.

A category is changed through the API only by the keys of the producer that owns it.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.conf import settings
from django.contrib.admin.models import CHANGE, LogEntry
from django.contrib.auth import get_user_model
from django.contrib.contenttypes.models import ContentType
from django.db.models import Exists, OuterRef, Q

from notify.erasure import erasure_hash
from notify.models import (
    ApiKey,
    Category,
    ContactChange,
    Producer,
    Recipient,
    RecipientGrant,
    SuppressedKind,
)

# The user that changes made through the API are filed under in admin's history.
API_CHANGES_USER = "api-keys"
# The contact fields whose changes are recorded, and the hash kind each is kept under.
GUARDED_CONTACT_FIELDS = {"email": SuppressedKind.EMAIL, "phone": SuppressedKind.PHONE}


@dataclass(frozen=True)
class ChangeAuthor:
    """Who changes a person's data: a producer's key, or someone named in words (a staff
    user in admin, the person on the preference center)."""

    described: str
    producer: Producer | None = None
    key_prefix: str = ""

    @classmethod
    def of_key(cls, api_key: ApiKey) -> ChangeAuthor:
        """The author for a request made with `api_key`."""
        return cls(
            described=f"producer {api_key.producer.name} (key {api_key.prefix})",
            producer=api_key.producer,
            key_prefix=api_key.prefix,
        )


def contact_changes_record(
    *, recipient: Recipient, before: dict[str, str], author: ChangeAuthor | None
) -> list[ContactChange]:
    """Record each guarded contact field (email, phone) whose value differs from `before`
    on the recipient as it is now; one INSERT for all of them, none when nothing changed."""
    changes = []
    for field, kind in GUARDED_CONTACT_FIELDS.items():
        old, new = before.get(field, ""), getattr(recipient, field)
        if old == new:
            continue
        changes.append(
            ContactChange(
                recipient=recipient,
                field=field,
                old_hash=erasure_hash(kind=kind, value=old) if old else "",
                new_hash=erasure_hash(kind=kind, value=new) if new else "",
                producer=author.producer if author else None,
                key_prefix=author.key_prefix if author else "",
                changed_by=(author.described if author else "unknown")[:200],
            )
        )
    return ContactChange.objects.bulk_create(changes) if changes else []


def recipient_reach_refusal(*, producer: Producer, user_id: str) -> str | None:
    """Why `producer` may not act on the person with `user_id` (a message), or None when it
    may. Always None while recipients are shared (the default); while they are owned
    (NOTIFY_RECIPIENTS_OWNED), a producer reaches the recipients it registered or was
    granted, and any user id not registered yet (registering it makes it its own).
    One query, only while owned."""
    if not settings.NOTIFY_RECIPIENTS_OWNED:
        return None
    granted = RecipientGrant.objects.filter(recipient=OuterRef("pk"), producer=producer)
    reachable = (
        Recipient.objects.filter(user_id=user_id)
        .annotate(reachable=Q(created_by=producer) | Exists(granted))
        .values_list("reachable", flat=True)
        .first()
    )
    if reachable is None or reachable:
        return None
    return "This recipient was registered by another producer and not granted to yours."


def category_change_refusal(*, api_key: ApiKey, category: Category) -> str | None:
    """Why this key may not change `category`'s settings (a message), or None when it may:
    only the keys of the producer that owns the category (set in admin) may."""
    if category.owner_id is None:
        return "This category has no owning producer: only staff may change it, in admin."
    if category.owner_id != api_key.producer_id:
        return "This category belongs to another producer."
    return None


def category_change_log(
    *, category: Category, fields: list[str], author: ChangeAuthor | None
) -> None:
    """Write a change of `category` made outside admin into its admin history, naming the
    key that made it. Admin's history needs a user: changes through the API are filed
    under one inactive user (API_CHANGES_USER) that cannot sign in, with the producer and
    key in the message."""
    user, created = get_user_model().objects.get_or_create(
        username=API_CHANGES_USER, defaults={"is_active": False}
    )
    if created:
        user.set_unusable_password()
        user.save(update_fields=["password"])
    who = author.described if author else "unknown"
    LogEntry.objects.create(
        user=user,
        content_type=ContentType.objects.get_for_model(Category),
        object_id=str(category.pk),
        object_repr=str(category)[:200],
        action_flag=CHANGE,
        change_message=f"Changed {', '.join(fields)} through the API by {who}.",
    )
