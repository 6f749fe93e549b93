"""The record's statements: a round's attempt rows, the wake of what they held, and every
delivery's next state, written in one statement (deliveries/pipeline/outcome.py runs
them and decides what they write)."""

from __future__ import annotations

from functools import cache

from deliveries.models import Delivery, DeliveryAttempt, DeliveryStatus
from deliveries.pipeline.ordering import WAKE_HELD_SQL
from notify.rows import row_probe
from pgarrays import PlannedOnce, planned_once

# Every delivery's next state in one statement. A NULL keeps the column as it is (a
# retry keeps its reason, a failure its provider message id); `clear_enqueued` drops
# `enqueued_at` for a wait the sweeper owns; `bump` moves the attempt budget past an
# uncharged probe. Written only where the claim still holds (`sending`, its claim's time).
OUTCOME_COLUMNS = {
    "id": "bigint", "month": "timestamptz", "claimed_at": "timestamptz", "status": "text",
    "last_error": "text", "reason": "text", "provider_message_id": "text",
    "finished_at": "timestamptz", "next_attempt_at": "timestamptz", "clear_enqueued": "boolean",
    "bump": "int", "handovers": "int", "pin": "text",
}  # fmt: skip
_OUTCOME_ROWS = (
    f"unnest({', '.join(f'%({name})s::{kind}[]' for name, kind in OUTCOME_COLUMNS.items())})"
    f" AS v({', '.join(OUTCOME_COLUMNS)})"
)
_OUTCOME_SET = """
       SET status = v.status, updated_at = %(now)s, last_error = v.last_error,
           reason = COALESCE(v.reason, d.reason),
           provider_message_id = COALESCE(v.provider_message_id, d.provider_message_id),
           finished_at = COALESCE(v.finished_at, d.finished_at),
           next_attempt_at = COALESCE(v.next_attempt_at, d.next_attempt_at),
           enqueued_at = CASE WHEN v.clear_enqueued THEN NULL ELSE d.enqueued_at END,
           attempts = d.attempts + v.handovers,
           attempt_budget_from = d.attempt_budget_from + v.bump + v.handovers,
           pinned_provider = COALESCE(v.pin, d.pinned_provider)
"""
_SENDING = f"'{DeliveryStatus.SENDING.value}'"
# Each row is found by a primary-key probe (`row_probe`) and updated where that probe
# found it (a TID scan). Joined on its key instead, with no statistics yet, the planner
# found the round's rows through the partial index of every delivery being sent, and a
# campaign's record read all of them each round. For the same reason the claim is
# checked against the probe's `claimed` column rather than a constant: a constant lets
# the planner prove that index usable. A row that another transaction changed meanwhile
# is left out here (PostgreSQL rechecks where it was found); it is written by key
# (`OUTCOMES_BY_KEY_SQL`) in a statement of its own, which rechecks its claim.
_FOUND = row_probe(
    Delivery._meta.db_table,
    "id = v.id AND accepted_at = v.month",
    alias="f",
    columns=f"tableoid, ctid, {_SENDING}::text AS claimed",
)
OUTCOMES_SQL = planned_once(
    f"""
    UPDATE {Delivery._meta.db_table} AS d {_OUTCOME_SET}
      FROM (SELECT v.*, f.tableoid AS found_in, f.ctid AS found_at, f.claimed
              FROM {_OUTCOME_ROWS} {_FOUND}) v
     WHERE d.tableoid = v.found_in AND d.ctid = v.found_at
       AND d.status = v.claimed AND d.claimed_at = v.claimed_at
    RETURNING d.id
"""
)
OUTCOMES_BY_KEY_SQL = planned_once(
    f"""
    UPDATE {Delivery._meta.db_table} AS d {_OUTCOME_SET}
      FROM {_OUTCOME_ROWS}
     WHERE d.id = v.id AND d.accepted_at = v.month
       AND d.status = {_SENDING} AND d.claimed_at = v.claimed_at
    RETURNING d.id
"""
)


# The attempt rows of a batch, the wake of what each one that is done with held (the
# next held delivery of each order rank it may hold: deliveries/pipeline/ordering.py),
# and every delivery's next state (`OUTCOMES_SQL`), in one statement: per-recipient
# order and the outcomes cost a round no round trip of their own. The woken rows are
# held ones (`held_since` set), never the round's members (their claim cleared it), so
# no row is updated twice; all parts see the rows as they were before the statement.
# Arrays, not a VALUES list, so the text is the same for every batch size and is
# prepared once. A data-modifying CTE runs whether or not the final SELECT reads it:
# what rides with the round (deliveries.changes: the analytics events of the deliveries
# `outcome` wrote) goes in as more CTEs before the SELECT.
RECORD_WITH = planned_once(
    f"""
    WITH attempt AS (
        INSERT INTO {DeliveryAttempt._meta.db_table}
            (delivery_id, number, started_at, duration_ms, outcome, status_code, response,
             held_ms, accepted_at, provider_message_id, provider)
        SELECT * FROM unnest(%(delivery)s::bigint[], %(number)s::int[],
                             %(started_at)s::timestamptz[], %(duration)s::int[],
                             %(outcome)s::text[], %(status_code)s::text[], %(response)s::text[],
                             %(held)s::int[], %(accepted_at)s::timestamptz[],
                             %(attempt_message_id)s::text[], %(provider)s::text[])
        RETURNING 1
    ), done AS (
        SELECT * FROM unnest(%(w_recipient)s::bigint[], %(w_channel)s::text[],
                             %(w_queue)s::text[], %(w_occurred)s::timestamptz[],
                             %(w_accepted)s::timestamptz[], %(w_notification)s::uuid[])
               AS f(recipient_id, channel, queue, occurred_at, accepted_at, notification_id)
         WHERE f.recipient_id IS NOT NULL
    ), woken AS (
        UPDATE {Delivery._meta.db_table} SET enqueued_at = %(now)s
         WHERE id IN (SELECT w.id FROM done f CROSS JOIN LATERAL ({WAKE_HELD_SQL}) w)
        RETURNING queue, channel, id
    ), outcome AS ({OUTCOMES_SQL})"""
)
RECORD_SELECT = """
    SELECT queue, channel, id, false FROM woken
    UNION ALL SELECT '', '', id, true FROM outcome
"""


@cache
def record_sql(riding: str) -> PlannedOnce:
    """The round's record with what rides along (`riding`: more CTEs, or none), still
    marked as a hot statement (a plain `+` would make it an ordinary string)."""
    return PlannedOnce(RECORD_WITH + riding + RECORD_SELECT)


RECORD_SQL = record_sql("")
