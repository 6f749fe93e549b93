"""The envelope sender that names a delivery (VERP), and reading it back.

`bounces+<delivery id>.<signature>@<NOTIFY_BOUNCE_DOMAIN>`: bounces are sent to the
envelope sender, so the one that comes back says which delivery it is about whatever the
bounce's format. The signature (a keyed hash of the id) keeps anyone who can mail the
bounce domain from failing or suppressing another delivery by guessing ids.
"""

from __future__ import annotations

import hmac
import re

from django.conf import settings
from django.utils.crypto import salted_hmac

SALT = "notify.bounces.verp"
SIGNATURE_CHARS = 16  # 64 bits of the keyed hash: not guessable by mailing the domain

_LOCAL = re.compile(r"(?P<prefix>[A-Za-z0-9._-]+)\+(?P<id>[0-9]{1,19})\.(?P<sig>[0-9a-f]+)")


def _signature(delivery_id: int) -> str:
    return salted_hmac(SALT, str(delivery_id)).hexdigest()[:SIGNATURE_CHARS]


def verp_address(delivery_id: int | None) -> str:
    """The envelope sender for an email of `delivery_id` ("" while no bounce domain is
    set, or for a delivery never saved, such as a staff member's test email: the email
    goes out with the usual sender)."""
    domain = settings.NOTIFY_BOUNCE_DOMAIN
    if not domain or delivery_id is None:
        return ""
    local = settings.NOTIFY_BOUNCE_LOCAL_PART
    return f"{local}+{delivery_id}.{_signature(delivery_id)}@{domain}"


def at_bounce_domain(address: str) -> bool:
    """Is `address` (angle brackets allowed) at NOTIFY_BOUNCE_DOMAIN? False while unset."""
    domain = address.strip().strip("<>").rpartition("@")[2].lower()
    return bool(settings.NOTIFY_BOUNCE_DOMAIN) and domain == settings.NOTIFY_BOUNCE_DOMAIN.lower()


def verp_delivery(address: str) -> int | None:
    """The delivery id a bounce address names, if it is one of ours and its signature
    holds; None otherwise."""
    if not at_bounce_domain(address):
        return None
    local = address.strip().strip("<>").rpartition("@")[0]
    match = _LOCAL.fullmatch(local)
    if match is None or match["prefix"] != settings.NOTIFY_BOUNCE_LOCAL_PART:
        return None
    delivery_id = int(match["id"])
    if not hmac.compare_digest(match["sig"], _signature(delivery_id)):
        return None
    return delivery_id
