"""Posting status webhook events: claim, sign, post through the egress guard, record.

Each post is one attempt row (answer, duration). 2xx → the event is delivered. Anything
else (an answer, a timeout, a refused address, a redirect, which is never followed) →
it is tried again after the next of NOTIFY_WEBHOOK_RETRY_DELAYS, jittered; after the
last it is `failed` (until re-delivered: webhooks/redelivery.py). An endpoint
that failed NOTIFY_WEBHOOK_DISABLE_FAILURES times in a row over at least
NOTIFY_WEBHOOK_DISABLE_AFTER seconds is disabled with the reason; its events wait
(pending, bounded: webhooks/backlog.py) until it is re-enabled.

Events are claimed with a conditional UPDATE (`pending → sending`), so a message that
arrives twice posts once; a claim of a lost worker is given back by the sweep.
"""

from __future__ import annotations

import json
import logging
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

import requests
from django.conf import settings
from django.db import connection, transaction
from django.db.models import F, Value
from django.db.models.functions import Coalesce
from django.utils import timezone

from egress.guard import connections_pinned, egress_session, egress_target
from egress.origins import EndpointRefused
from webhooks.backlog import disabled_backlogs_trim
from webhooks.events import events_by_endpoint, webhook_posts_publish
from webhooks.models import (
    WebhookAttempt,
    WebhookEndpoint,
    WebhookEvent,
    WebhookEventStatus,
)
from webhooks.signing import signed_headers

logger = logging.getLogger(__name__)


# Orders the events about one delivery (0: notification.routed, before them all).
SEQUENCE_HEADER = "webhook-sequence"


@dataclass(frozen=True)
class PostResult:
    """The classified answer of one post."""

    ok: bool
    status_code: str
    response: str


def webhook_retry_delay(
    *, attempts: int, delays: Sequence[float], jitter: float, rng: random.Random | None = None
) -> float | None:
    """Seconds until the next try after `attempts` failed ones (jittered by ±`jitter`),
    or None when the schedule is spent."""
    if attempts > len(delays):
        return None
    delay = delays[attempts - 1]
    return max(0.0, delay * (1 + (rng or random).uniform(-jitter, jitter)))


def endpoint_should_disable(
    *, failures_in_row: int, failing_since: datetime | None, now: datetime
) -> bool:
    """An endpoint is disabled once it has failed enough times in a row for long enough."""
    if failing_since is None or failures_in_row < settings.NOTIFY_WEBHOOK_DISABLE_FAILURES:
        return False
    return (now - failing_since).total_seconds() >= settings.NOTIFY_WEBHOOK_DISABLE_AFTER


def endpoint_secrets(endpoint: WebhookEndpoint, *, now: datetime) -> list[str]:
    """The secrets that sign now: the current one, and a rotated-out one in its overlap."""
    live = [endpoint.secret]
    until = endpoint.previous_secret_until
    if endpoint.previous_secret and until is not None and until > now:
        live.append(endpoint.previous_secret)
    return live


def event_body(event: WebhookEvent) -> bytes:
    """The bytes posted (and signed) for an event: the same on every try."""
    return json.dumps(event.payload, separators=(",", ":"), ensure_ascii=False).encode()


def event_post(event: WebhookEvent, *, now: datetime) -> PostResult:
    """Sign and post one event to its endpoint; never raises for a network failure."""
    endpoint = event.endpoint
    try:
        target = egress_target(
            endpoint.url, allowed_private=settings.NOTIFY_WEBHOOK_ALLOWED_PRIVATE_ORIGINS
        )
    except EndpointRefused as refused:
        return PostResult(False, "egress_refused", f"endpoint {refused.reason}")
    body = event_body(event)
    headers = signed_headers(
        secrets_live=endpoint_secrets(endpoint, now=now),
        msg_id=event.msg_id,
        timestamp=int(time.time()),
        body=body,
    )
    # The body's `data.sequence`, where a receiver can read it before parsing the body.
    headers[SEQUENCE_HEADER] = str(event.sequence)
    session = egress_session(
        settings.NOTIFY_WEBHOOK_CALL_DEADLINE, settings.NOTIFY_WEBHOOK_MAX_RESPONSE_BYTES
    )
    try:
        with connections_pinned(target):  # to the addresses just checked, never a new lookup
            response = session.post(
                endpoint.url,
                data=body,
                headers=headers,
                timeout=settings.NOTIFY_WEBHOOK_CALL_DEADLINE,
            )
    except requests.RequestException as error:
        code = "timeout" if isinstance(error, requests.Timeout) else type(error).__name__
        return PostResult(False, code, str(error)[:500])
    text = response.content[:500].decode("utf-8", "replace")
    return PostResult(200 <= response.status_code < 300, str(response.status_code), text)


_CLAIM_SQL = f"""
    UPDATE {WebhookEvent._meta.db_table} AS ev
       SET status = '{WebhookEventStatus.SENDING.value}', claimed_at = %(now)s
      FROM {WebhookEndpoint._meta.db_table} AS e
     WHERE ev.id = ANY(%(ids)s) AND ev.status = '{WebhookEventStatus.PENDING.value}'
       AND ev.next_attempt_at <= %(due)s AND e.id = ev.endpoint_id AND e.active
    RETURNING ev.id
"""


def webhook_events_post(*, event_ids: Sequence[int]) -> list[str]:
    """Post the events of one message (one endpoint's), in order; their outcomes.

    After a failed post the rest of the message is not tried: it waits with the failed
    one (a down receiver costs one timeout per message, not one per event). The posts'
    attempts and outcomes are written together at the end (a worker lost before that
    leaves them claimed; the sweep gives them back and they are posted again, under the
    same `webhook-id`, which the receiver deduplicates by).
    """
    now = timezone.now()
    with connection.cursor() as cursor:
        early = timedelta(seconds=settings.NOTIFY_WEBHOOK_CLAIM_EARLY)
        cursor.execute(_CLAIM_SQL, {"ids": list(event_ids), "now": now, "due": now + early})
        claimed = [row[0] for row in cursor.fetchall()]
    if not claimed:
        return []
    events = list(WebhookEvent.objects.select_related("endpoint").filter(pk__in=claimed))
    events.sort(key=lambda e: e.pk)
    tried: list[Posted] = []
    for event in events:
        started = timezone.now()
        begun = time.monotonic()
        result = event_post(event, now=started)
        tried.append(Posted(event, result, started, int((time.monotonic() - begun) * 1000)))
        if not result.ok:
            break
    rest = [e.pk for e in events[len(tried) :]]
    next_at = posts_record(tried)
    if not tried[-1].result.ok:
        _retry_publish(tried[-1].event, rest, next_at)
    outcomes = ["delivered" if p.result.ok else "failed" for p in tried]
    return outcomes + ["waiting"] * len(rest)


@dataclass(frozen=True)
class Posted:
    """One post made: its event, the answer, when it started and how long it took."""

    event: WebhookEvent
    result: PostResult
    started: datetime
    duration: int


def _retry_publish(failed: WebhookEvent, rest: list[int], next_at: datetime | None) -> None:
    """Give the untried claims back, due with the failed event before them (now, when it
    has no next try), and publish one message for them all when the wait is near; a
    longer wait is the sweep's."""
    now = timezone.now()
    due = next_at or now
    delay = max(0.0, (due - now).total_seconds())
    near = delay <= settings.NOTIFY_WEBHOOK_COUNTDOWN_MAX
    if rest:
        WebhookEvent.objects.filter(pk__in=rest, status=WebhookEventStatus.SENDING).update(
            status=WebhookEventStatus.PENDING,
            claimed_at=None,
            next_attempt_at=due,
            enqueued_at=due if near else None,
        )
    ids = rest + ([failed.pk] if next_at is not None else [])
    if ids and near:
        webhook_posts_publish(by_endpoint={failed.endpoint_id: ids}, countdown=delay or None)


def posts_record(posted: Sequence[Posted]) -> datetime | None:
    """Write the posts' attempt rows, their events' next states and the endpoint's
    health, in one transaction; the posts are one endpoint's, only the last may have
    failed. Returns when a failed event is tried again (None: no failure, or its
    schedule is spent and it is `failed`)."""
    now = timezone.now()
    endpoint = posted[0].event.endpoint
    delivered = [p.event.pk for p in posted if p.result.ok]
    failure = posted[-1] if not posted[-1].result.ok else None
    next_at: datetime | None = None
    with transaction.atomic():
        WebhookAttempt.objects.bulk_create(
            WebhookAttempt(
                event=p.event,
                endpoint=endpoint,
                number=p.event.attempts + 1,
                started_at=p.started,
                duration_ms=p.duration,
                ok=p.result.ok,
                status_code=p.result.status_code[:32],
                response=p.result.response,
            )
            for p in posted
        )
        claimed = WebhookEvent.objects.filter(status=WebhookEventStatus.SENDING)
        if delivered:
            claimed.filter(pk__in=delivered).update(
                status=WebhookEventStatus.DELIVERED,
                attempts=F("attempts") + 1,
                claimed_at=None,
                finished_at=now,
                last_error="",
            )
            if failure is None and (endpoint.failures_in_row or endpoint.failing_since):
                WebhookEndpoint.objects.filter(pk=endpoint.pk).update(
                    failures_in_row=0, failing_since=None
                )
        if failure is not None:
            next_at = _event_failed(failure, claimed.filter(pk=failure.event.pk), now=now)
            _endpoint_failed(endpoint, error=_error_text(failure.result), now=now)
    return next_at


def _error_text(result: PostResult) -> str:
    return f"{result.status_code} {result.response}".strip()[:2000]


def _event_failed(failure: Posted, rows, *, now: datetime) -> datetime | None:
    """The failed event waits for its next try, or is `failed` when its schedule is spent
    (counted from its last re-delivery)."""
    attempts = failure.event.attempts + 1
    delay = webhook_retry_delay(
        attempts=attempts - failure.event.attempts_before_redrive,
        delays=settings.NOTIFY_WEBHOOK_RETRY_DELAYS,
        jitter=settings.NOTIFY_RETRY_JITTER,
    )
    error = _error_text(failure.result)
    if delay is None:
        rows.update(
            status=WebhookEventStatus.FAILED,
            attempts=attempts,
            claimed_at=None,
            finished_at=now,
            last_error=error,
        )
        return None
    next_at = now + timedelta(seconds=delay)
    near = delay <= settings.NOTIFY_WEBHOOK_COUNTDOWN_MAX
    rows.update(
        status=WebhookEventStatus.PENDING,
        attempts=attempts,
        claimed_at=None,
        next_attempt_at=next_at,
        enqueued_at=next_at if near else None,
        last_error=error,
    )
    return next_at


def _endpoint_failed(endpoint: WebhookEndpoint, *, error: str, now: datetime) -> None:
    """Count a failure against the endpoint; disable it when it keeps failing."""
    WebhookEndpoint.objects.filter(pk=endpoint.pk).update(
        failures_in_row=F("failures_in_row") + 1,
        failing_since=Coalesce(F("failing_since"), Value(now)),
    )
    fresh = WebhookEndpoint.objects.only("failures_in_row", "failing_since", "active").get(
        pk=endpoint.pk
    )
    if fresh.active and endpoint_should_disable(
        failures_in_row=fresh.failures_in_row, failing_since=fresh.failing_since, now=now
    ):
        reason = (
            f"Disabled at {now:%Y-%m-%d %H:%M:%S} UTC after {fresh.failures_in_row} failed "
            f"posts in a row since {fresh.failing_since:%Y-%m-%d %H:%M:%S} UTC; "
            f"the last: {error[:500]}"
        )
        WebhookEndpoint.objects.filter(pk=endpoint.pk, active=True).update(
            active=False, disabled_reason=reason, disabled_at=now
        )
        logger.warning("webhook endpoint %s disabled: %s", endpoint.pk, reason)


_SWEEP_SQL = f"""
    WITH due AS (
        SELECT ev.id FROM {WebhookEvent._meta.db_table} ev
          JOIN {WebhookEndpoint._meta.db_table} e ON e.id = ev.endpoint_id AND e.active
         WHERE (ev.status = '{WebhookEventStatus.PENDING.value}'
                AND ev.next_attempt_at <= %(now)s
                AND (ev.enqueued_at IS NULL OR ev.enqueued_at < %(stale)s))
            OR (ev.status = '{WebhookEventStatus.SENDING.value}' AND ev.claimed_at < %(lost)s)
         ORDER BY ev.next_attempt_at
         LIMIT %(limit)s
         FOR UPDATE OF ev SKIP LOCKED
    )
    UPDATE {WebhookEvent._meta.db_table} AS ev
       SET status = '{WebhookEventStatus.PENDING.value}', claimed_at = NULL,
           enqueued_at = %(now)s
      FROM due WHERE ev.id = due.id
    RETURNING ev.id, ev.endpoint_id, ev.notification_id
"""


def webhook_events_sweep(*, now: datetime | None = None) -> int:
    """Beat: re-queue events whose try is due and not on its way (a retry past the
    countdown limit, a lost publish, a lost worker's claim); drop finished events past
    retention, and what disabled endpoints' backlogs hold beyond their bounds. Returns
    how many were re-queued."""
    now = now or timezone.now()
    grace = timedelta(seconds=settings.NOTIFY_WEBHOOK_SWEEP_GRACE)
    params = {
        "now": now,
        "stale": now - grace,
        "lost": now - grace - timedelta(seconds=settings.NOTIFY_WEBHOOK_CALL_DEADLINE),
        "limit": settings.NOTIFY_WEBHOOK_SWEEP_BATCH,
    }
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute(_SWEEP_SQL, params)
            rows = cursor.fetchall()
        by_endpoint, groups = events_by_endpoint(rows)
        if by_endpoint:
            transaction.on_commit(
                lambda: webhook_posts_publish(by_endpoint=by_endpoint, groups=groups)
            )
    kept = now - timedelta(days=settings.NOTIFY_WEBHOOK_RETENTION_DAYS)
    WebhookEvent.objects.filter(
        status__in=[WebhookEventStatus.DELIVERED, WebhookEventStatus.FAILED],
        finished_at__lt=kept,
    ).delete()
    disabled_backlogs_trim(now=now)
    return len(rows)
