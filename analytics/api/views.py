"""The analytics API: reports from the store, each producer seeing only its own.

Answered from the ClickHouse store's rollups (through the `analytics` process when the
store is embedded); `as_of` and `lag_seconds` say how fresh the answer is.
"""

from __future__ import annotations

import re
from datetime import UTC, date, timedelta

from django.utils import timezone
from django.utils.dateparse import parse_datetime
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from analytics.api import serializers as s
from analytics.store.archive_read import (
    HISTORY_CURSOR,
    ArchiveNotReadable,
    PageStart,
    page_start_from_cursor,
)
from analytics.store.backend import store_open
from analytics.store.reports import (
    GROUPS,
    HISTORY_PAGE_MAX,
    campaign_report,
    deliveries_report,
    store_freshness,
)
from campaigns.models import Campaign
from history.older import history_past_retention
from notify.api.errors import ApiError
from notify.api.lookups import user_id_checked
from notify.api.schema import ErrorResponseOut, error_responses
from notify.models import Scope

# The longest window one deliveries report covers (days): the rollups are per day.
MAX_REPORT_DAYS = 366
# The days ClickHouse's Date holds.
EARLIEST_DAY, LATEST_DAY = date(1970, 1, 1), date(2149, 6, 6)


_UNAVAILABLE = OpenApiResponse(
    response=ErrorResponseOut, description="The analytics store cannot be reached; retry."
)


def _store_query(read):
    try:
        return read(store_open())
    except OSError as error:  # the analytics process or the server is away
        raise ApiError(503, "analytics_unavailable", f"Analytics store: {error}") from None
    except ArchiveNotReadable as error:  # NOTIFY_ARCHIVE_URL of a kind read only by restore
        raise ApiError(503, "archive_unreadable", str(error)) from None


def _channel_document(counts: dict) -> dict:
    return {**counts, "audience": counts["accepted"]}


class CampaignReportApi(APIView):
    required_scope = Scope.CAMPAIGNS_WRITE

    @extend_schema(
        operation_id="get_campaign_report",
        responses={200: s.CampaignReportOut, 503: _UNAVAILABLE, **error_responses(404)},
        summary="A campaign's delivery report per channel, from the analytics store.",
    )
    def get(self, request: Request, campaign_id: int) -> Response:
        producer = request.user.producer
        if not Campaign.objects.filter(pk=campaign_id, producer=producer).exists():
            raise ApiError(404, "not_found", f"No campaign {campaign_id}.")
        freshness = store_freshness()
        channels = _store_query(
            lambda store: campaign_report(
                store=store, producer_id=producer.pk, campaign_id=campaign_id
            )
        )
        document = {
            "campaign_id": campaign_id,
            "channels": {name: _channel_document(c) for name, c in channels.items()},
            "as_of": freshness.as_of,
            "lag_seconds": freshness.lag_seconds,
        }
        return Response(s.CampaignReportOut(document).data)


def _day(request: Request, name: str, default: date) -> date:
    raw = request.query_params.get(name)
    if raw is None:
        return default
    try:
        if len(raw) != len("YYYY-MM-DD"):
            raise ValueError(raw)
        return date.fromisoformat(raw)
    except ValueError:
        raise ApiError(400, "invalid", f"{name} must be a date (YYYY-MM-DD).", field=name) from None


# What `group_by` may be: some of GROUPS, comma-separated (a repeat counts once).
GROUP_BY = re.compile(rf"({'|'.join(GROUPS)})(,({'|'.join(GROUPS)})){{0,{len(GROUPS) - 1}}}")


def _groups(request: Request) -> tuple[str, ...]:
    raw = request.query_params.get("group_by", "day")
    if not GROUP_BY.fullmatch(raw):
        raise ApiError(
            400,
            "invalid",
            f"group_by takes {', '.join(GROUPS)}, comma-separated.",
            field="group_by",
        )
    return tuple(dict.fromkeys(raw.split(",")))


class DeliveriesReportApi(APIView):
    required_scope = Scope.USERS_READ

    @extend_schema(
        operation_id="get_deliveries_report",
        parameters=[
            OpenApiParameter(
                "from",
                {"type": "string", "format": "date"},
                description="First day (UTC), included; default 30 days before `to`, and at "
                f"most {MAX_REPORT_DAYS} days before it (the answer's `from` says which).",
            ),
            OpenApiParameter(
                "to",
                {"type": "string", "format": "date"},
                description="Last day (UTC), included; default today.",
            ),
            OpenApiParameter(
                "group_by",
                {"type": "string", "pattern": f"^{GROUP_BY.pattern}$"},
                description="Comma-separated: day, category, channel, provider (default day).",
            ),
        ],
        responses={200: s.DeliveriesReportOut, 503: _UNAVAILABLE},
        summary="This producer's deliveries: counts by outcome and latency percentiles.",
    )
    def get(self, request: Request) -> Response:
        # Within the days the store can hold; a window longer than MAX_REPORT_DAYS starts
        # that many days before `to` (the answer says which days it covers).
        end = min(max(_day(request, "to", date.today()), EARLIEST_DAY), LATEST_DAY)
        start = min(_day(request, "from", end - timedelta(days=30)), LATEST_DAY)
        start = max(start, end - timedelta(days=MAX_REPORT_DAYS), EARLIEST_DAY)
        groups = _groups(request)
        freshness = store_freshness()
        results = _store_query(
            lambda store: deliveries_report(
                store=store,
                producer_id=request.user.producer.pk,
                start=start,
                end=end,
                group_by=groups,
            )
        )
        document = {
            "from": start,
            "to": end,
            "results": results,
            "as_of": freshness.as_of,
            "lag_seconds": freshness.lag_seconds,
        }
        return Response(s.DeliveriesReportOut(document).data)


class UserHistoryApi(APIView):
    required_scope = Scope.USERS_READ

    @extend_schema(
        operation_id="get_user_history",
        parameters=[
            OpenApiParameter(
                "before",
                {"type": "string", "format": "date-time"},
                description="Events before this time (default now), newest first.",
            ),
            OpenApiParameter(
                "cursor",
                {"type": "string", "pattern": HISTORY_CURSOR},
                description="`next_cursor` of the page before (instead of `before`).",
            ),
            OpenApiParameter(
                "limit",
                {"type": "integer", "minimum": 1, "maximum": HISTORY_PAGE_MAX},
                description=f"Events per page (default 50, at most {HISTORY_PAGE_MAX}).",
            ),
        ],
        responses={200: s.HistoryPageOut, 503: _UNAVAILABLE},
        summary="A person's delivery history past the 90 days PostgreSQL keeps: the "
        "analytics store's events and the archived months' deliveries, read in place by the "
        "store's engine (no restore). The slower path: seconds, not milliseconds.",
    )
    def get(self, request: Request, user_id: str) -> Response:
        user_id = user_id_checked(user_id)
        start = _page_start(request)
        raw_limit = request.query_params.get("limit", "50")
        if not (raw_limit.isascii() and raw_limit.isdigit()) or not (
            1 <= int(raw_limit) <= HISTORY_PAGE_MAX
        ):
            raise ApiError(400, "invalid", f"limit must be 1 to {HISTORY_PAGE_MAX}.", field="limit")
        limit = int(raw_limit)
        # The store's events and the archived months read in place, this producer's only.
        events = _store_query(
            lambda store: history_past_retention(
                user_id=user_id,
                producer_id=request.user.producer.pk,
                start=start,
                limit=limit,
            )
        )
        next_cursor = events[-1]["cursor"] if len(events) == limit else None
        return Response(s.HistoryPageOut({"results": events, "next_cursor": next_cursor}).data)


def _page_start(request: Request) -> PageStart:
    """Where a history page starts: after the entry `cursor` names, else at `before` (which
    must be a date-time whenever it is given)."""
    raw = request.query_params.get("before")
    moment = timezone.now()
    if raw is not None:
        try:
            parsed = parse_datetime(raw[:64])
        except ValueError:
            parsed = None
        if parsed is None:
            raise ApiError(400, "invalid", "before must be a date-time (ISO 8601).", field="before")
        moment = parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)
    cursor = request.query_params.get("cursor")
    if cursor is not None:
        if not re.fullmatch(HISTORY_CURSOR, cursor):
            raise ApiError(400, "invalid_cursor", "Unknown cursor.", field="cursor")
        return page_start_from_cursor(cursor)
    return PageStart(before=moment)
