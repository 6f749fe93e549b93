"""Erasure, the preferences' part: consent records stay as evidence under the keyed hash
of the user id; preferences, quiet hours and the daily counters go. Called by
campaigns.erasure.person_erase before the recipient row itself is deleted."""

from __future__ import annotations

from notify.erasure import user_hash
from notify.models import Recipient
from preferences.models import ConsentRecord, MarketingDayCount, Preference, QuietHours


def preferences_erase(*, recipient: Recipient) -> dict[str, int]:
    """Detach the recipient's consent history and delete the rest; returns counts.

    A consent record keeps when, what, granted or withdrawn, the source and the text
    version; it loses the link to the person (now `user_hash`), the IP address and the
    user agent, which would identify them.
    """
    kept = ConsentRecord.objects.filter(recipient=recipient).update(
        recipient=None, user_hash=user_hash(recipient.user_id), ip_address=None, user_agent=""
    )
    return {
        "consent_records_kept": kept,
        "preferences": Preference.objects.filter(recipient=recipient).delete()[0],
        "quiet_hours": QuietHours.objects.filter(recipient=recipient).delete()[0],
        "marketing_counts": MarketingDayCount.objects.filter(recipient=recipient).delete()[0],
    }


def consent_history_count(*, user_id: str) -> int:
    """How many consent records are kept for an erased user id (found by its hash)."""
    return ConsentRecord.objects.filter(user_hash=user_hash(user_id)).count()
