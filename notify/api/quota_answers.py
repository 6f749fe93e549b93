"""A producer quota's answers at the API door: the 429, a batch item's refusal, and the
RateLimit headers.

The headers are those of draft-ietf-httpapi-ratelimit-headers-06 (the separate fields,
as widely deployed; later drafts merge them into `RateLimit` and `RateLimit-Policy`):
`RateLimit-Policy` lists every quota that applies as `<limit>;w=<window seconds>`, and
`RateLimit-Limit`, `RateLimit-Remaining` and `RateLimit-Reset` describe the one closest
to being used up, as the draft asks. Reset is the seconds until that quota is whole
again (the minute bucket full, or UTC midnight); `Retry-After` is when the next event
could be accepted.
"""

from __future__ import annotations

from collections.abc import Callable

from rest_framework.response import Response

from notify.api.auth import RateLimiterUnavailable
from notify.api.errors import error_body
from notify.models import Producer
from notify.quotas import (
    CAMPAIGN_EVENTS_PER_DAY,
    EVENTS_PER_DAY,
    EVENTS_PER_MINUTE,
    Charge,
    QuotaState,
    QuotasUnavailable,
    campaign_charge,
    events_charge,
)

QUOTA_EXCEEDED = "quota_exceeded"


def events_charge_or_503(*, producer: Producer, count: int) -> Charge | None:
    """`events_charge`, with Redis down and the limiter failing closed answered as the
    rate limit answers it: 503 with Retry-After."""
    try:
        return events_charge(producer=producer, count=count)
    except QuotasUnavailable:
        raise RateLimiterUnavailable() from None


def campaign_charge_or_503(
    *, producer: Producer, count_audience: Callable[[], int]
) -> Charge | None:
    """`campaign_charge`, answered as `events_charge_or_503` when Redis is down."""
    try:
        return campaign_charge(producer=producer, count_audience=count_audience)
    except QuotasUnavailable:
        raise RateLimiterUnavailable() from None


def quota_message(charge: Charge) -> str:
    """What was refused, naming the quota, and when to come back."""
    if charge.refused_by == EVENTS_PER_MINUTE:
        return (
            f"This producer's quota of {charge.limit} events per minute is used up; "
            f"retry in {charge.retry_after} s."
        )
    if charge.refused_by == EVENTS_PER_DAY:
        return (
            f"This producer's quota of {charge.limit} events per day (UTC) is used up; "
            "it renews at midnight UTC."
        )
    if charge.refused_by == CAMPAIGN_EVENTS_PER_DAY:
        message = (
            f"This launch's {charge.asked} recipients do not fit in what is left today of "
            f"this producer's quota of {charge.limit} campaign recipients per day (UTC)"
        )
        if charge.limit is not None and charge.asked > charge.limit:
            return message + "; the audience is larger than a whole day's quota: split it."
        return message + "; it renews at midnight UTC."
    return "A quota of this producer is used up."


def _closest(states: tuple[QuotaState, ...]) -> QuotaState:
    """The quota closest to being used up: the least left, then the longest to renew."""
    return min(states, key=lambda state: (state.remaining, -state.reset))


def quota_headers(charge: Charge | None) -> dict[str, str]:
    """The RateLimit headers of a charge (and Retry-After when any was refused); none
    when nothing was charged (no quota applies, or Redis was down and let it through)."""
    if charge is None or not charge.states:
        return {}
    closest = _closest(charge.states)
    headers = {
        "RateLimit-Policy": ", ".join(f"{s.limit};w={s.window}" for s in charge.states),
        "RateLimit-Limit": str(closest.limit),
        "RateLimit-Remaining": str(closest.remaining),
        "RateLimit-Reset": str(closest.reset),
    }
    if charge.refused:
        headers["Retry-After"] = str(charge.retry_after)
    return headers


def with_quota_headers(response: Response, charge: Charge | None) -> Response:
    """`response`, carrying the charge's RateLimit headers."""
    for name, value in quota_headers(charge).items():
        response[name] = value
    return response


def quota_exceeded(charge: Charge) -> Response:
    """429 `quota_exceeded`, naming the quota, with Retry-After and the RateLimit headers."""
    return with_quota_headers(
        Response(error_body(QUOTA_EXCEEDED, quota_message(charge)), status=429), charge
    )


def quota_item_error(charge: Charge) -> dict:
    """A batch item's answer when the quota refused it: its status and error."""
    return {"status": 429, **error_body(QUOTA_EXCEEDED, quota_message(charge))}
