"""A campaign's audience: checking its spec, and the SQL condition that selects it.

The audience only says who is asked; the gate still decides per channel at routing
(opt-outs, consent, quiet hours, the daily cap), so "everyone with consent" is a
narrowing for speed, not the check itself.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import connection

from campaigns.models import AudienceKind, Campaign, CampaignMember, StagedMember
from notify.models import Category, Notification, Recipient
from preferences.models import ConsentRecord

RECIPIENTS = Recipient._meta.db_table
SEGMENT_LISTS = ("locale", "timezone")
SEGMENT_FLAGS = ("has_email", "has_phone")
EVENT_ID_MAX = Notification._meta.get_field("event_id").max_length


@dataclass(frozen=True)
class AudienceProblem:
    field: str  # e.g. "audience.segment.locale"
    message: str


def audience_problem(kind: str, spec: dict[str, Any]) -> AudienceProblem | None:
    """What is wrong with an audience spec, naming the field; None when it is usable."""
    if kind in (AudienceKind.ALL, AudienceKind.UPLOAD):  # an upload is checked as a file
        return None
    if kind == AudienceKind.USER_IDS:
        user_ids = spec.get("user_ids")
        if not isinstance(user_ids, list) or not user_ids:
            return AudienceProblem("audience.user_ids", "Give a non-empty list of user ids.")
        if len(user_ids) > settings.NOTIFY_CAMPAIGN_MAX_USER_IDS:
            return AudienceProblem(
                "audience.user_ids",
                f"At most {settings.NOTIFY_CAMPAIGN_MAX_USER_IDS} user ids per campaign.",
            )
        if not all(isinstance(u, str) and u for u in user_ids):
            return AudienceProblem("audience.user_ids", "Every user id is a non-empty string.")
        return None
    if kind == AudienceKind.SEGMENT:
        return _segment_problem(spec)
    return AudienceProblem("audience", f"Unknown audience kind {kind!r}.")


def _segment_problem(spec: dict[str, Any]) -> AudienceProblem | None:
    if not isinstance(spec, dict) or not spec:
        return AudienceProblem("audience.segment", "A segment names at least one field.")
    for name, value in spec.items():
        where = f"audience.segment.{name}"
        if name in SEGMENT_LISTS:
            values = [value] if isinstance(value, str) else value
            if not isinstance(values, list) or not values:
                return AudienceProblem(where, "Give a value or a non-empty list of values.")
            if not all(isinstance(v, str) for v in values):
                return AudienceProblem(where, "Every value is a string.")
        elif name in SEGMENT_FLAGS:
            if not isinstance(value, bool):
                return AudienceProblem(where, "Must be true or false.")
        else:
            known = ", ".join((*SEGMENT_LISTS, *SEGMENT_FLAGS))
            return AudienceProblem(where, f"Unknown segment field; use one of {known}.")
    return None


def audience_sql(campaign: Campaign, *, batch: int | None = None) -> tuple[str, dict[str, Any]]:
    """A WHERE condition on recipient `r` that selects the campaign's audience.

    A user-id list is read from the campaign row inside the statement, so a long list
    is not sent to the database with every batch. Recipients whose event id would not
    fit the column are left out (it would fail the whole batch). `batch`: the condition
    picks the fan-out's next `batch` recipients by id, which decides how a long list is
    matched (`_list_hashed`).
    """
    params: dict[str, Any] = {
        "a_campaign": campaign.pk,
        "a_category": campaign.category_id,
        "a_uid_max": EVENT_ID_MAX - len(campaign.event_id_prefix),
    }
    conditions = ["char_length(r.user_id) <= %(a_uid_max)s"]
    spec = campaign.audience_spec or {}
    if campaign.audience_kind == AudienceKind.USER_IDS and campaign.pk is None:
        # A campaign not stored (an estimate before launch): its list is a parameter.
        params["a_user_ids"] = list(spec.get("user_ids") or [])
        conditions.append("r.user_id = ANY(%(a_user_ids)s)")
    elif campaign.audience_kind == AudienceKind.USER_IDS:
        listed = f"""r.user_id IN (
                SELECT jsonb_array_elements_text(c.audience_spec -> 'user_ids')
                  FROM {Campaign._meta.db_table} c WHERE c.id = %(a_campaign)s)"""
        # `IS TRUE` keeps the list a set, hashed once, that the recipients of the
        # batch's id range are looked up in; a bare IN becomes a join that PostgreSQL
        # (guessing 100 listed ids) drives from the list, probing the recipients once
        # per listed id.
        conditions.append(f"({listed}) IS TRUE" if _list_hashed(campaign, batch) else listed)
    elif campaign.audience_kind == AudienceKind.UPLOAD and campaign.pk is None:
        # An upload not launched yet (an estimate): its staged rows (campaigns/upload.py).
        params["a_staged"] = _staged_id(spec.get("staged_upload"))
        conditions.append(
            f"""r.user_id IN (
                SELECT s.user_id FROM {StagedMember._meta.db_table} s
                 WHERE s.staged_id = %(a_staged)s)"""
        )
    elif campaign.audience_kind == AudienceKind.UPLOAD:
        conditions.append(
            f"""r.user_id IN (
                SELECT m.user_id FROM {CampaignMember._meta.db_table} m
                 WHERE m.campaign_id = %(a_campaign)s)"""
        )
    elif campaign.audience_kind == AudienceKind.SEGMENT:
        for name in SEGMENT_LISTS:
            if name in spec:
                value = spec[name]
                params[f"a_{name}"] = [value] if isinstance(value, str) else list(value)
                conditions.append(f"r.{name} = ANY(%(a_{name})s)")
        for name, column in (("has_email", "email"), ("has_phone", "phone")):
            if name in spec:
                conditions.append(f"r.{column} {'<>' if spec[name] else '='} ''")
    elif campaign.audience_kind == AudienceKind.ALL:
        conditions.append(_consent_sql())
    return " AND ".join(conditions), params


def _list_hashed(campaign: Campaign, batch: int | None) -> bool:
    """`list_matched_as_set` for a fan-out batch of `campaign` (the join before the first
    batch has fixed the audience, and outside the fan-out)."""
    until = campaign.audience_until
    if batch is None or not until:
        return False
    listed = len((campaign.audience_spec or {}).get("user_ids") or [])
    return list_matched_as_set(listed=listed, batch=batch, until=until)


def list_matched_as_set(*, listed: int, batch: int, until: int) -> bool:
    """Whether fan-out batches of `batch` match a list of `listed` user ids as a hashed
    set rather than as a join, for an audience whose highest recipient id is `until`.

    The join probes the recipients once per listed id in every batch: L ids in batches
    of B cost L * L / B probes over the campaign (a 100,000-id list, 5 million). The set
    reads the recipients in id order from where the last batch ended until the batch is
    full: over the campaign, at most each recipient up to the audience's highest id,
    once. So the set is chosen when L * L / B is the larger; a short list on a large
    install keeps the join (3,000 ids among 10 million people: 4,500 probes rather than
    a read of 10 million rows).
    """
    return listed * listed > batch * until


def _staged_id(value: object) -> uuid.UUID | None:
    """A staged upload's id as a UUID (None, which selects nobody, when it is not one)."""
    try:
        return uuid.UUID(str(value))
    except ValueError:
        return None


def audience_size_at_launch(*, kind: str, spec: dict[str, Any], category: Category) -> int:
    """How many recipients a campaign about to be stored would reach, for its quota: a
    user-id list's length, else one COUNT of the recipients its condition selects now
    (the first fan-out batch fixes the audience, so it may differ by those who sign up
    or leave in between). An upload is loaded once the campaign exists (admin): 0."""
    if kind == AudienceKind.USER_IDS:
        return len(spec["user_ids"])
    if kind == AudienceKind.UPLOAD:
        return 0
    probe = Campaign(category=category, audience_kind=kind, audience_spec=spec)
    condition, params = audience_sql(probe)
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT count(*) FROM {RECIPIENTS} r WHERE {condition}", params)
        return cursor.fetchone()[0]


def _consent_sql() -> str:
    """A grant covering the category (or all marketing) that no later withdrawal of the
    same or a wider scope took back — on at least one channel."""
    table = ConsentRecord._meta.db_table
    return f"""EXISTS (
        SELECT 1 FROM {table} g
         WHERE g.recipient_id = r.id AND g.granted
           AND (g.category_id = %(a_category)s OR g.category_id IS NULL)
           AND NOT EXISTS (
               SELECT 1 FROM {table} w
                WHERE w.recipient_id = r.id AND w.id > g.id AND NOT w.granted
                  AND (w.category_id = %(a_category)s OR w.category_id IS NULL)
                  AND (w.channel = '' OR w.channel = g.channel)))"""
