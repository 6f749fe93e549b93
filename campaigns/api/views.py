"""The campaign API: one class per operation, thin over the campaign services.

Producers authenticate with their API key, as for single events; a campaign belongs to
the key's producer, and only that producer sees and controls it.
"""

from __future__ import annotations

from collections.abc import Callable

from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from campaigns.api import serializers as s
from campaigns.audience import audience_problem, audience_size_at_launch
from campaigns.control import (
    CampaignStateError,
    campaign_cancel,
    campaign_pause,
    campaign_resume,
)
from campaigns.estimate import campaign_estimate
from campaigns.fanout import campaign_launch
from campaigns.models import AudienceKind, Campaign
from campaigns.selectors import campaign_progress
from notify.api.errors import ApiError, first_validation_error
from notify.api.lookups import category_allowed, category_or_422, payload_fits
from notify.api.quota_answers import campaign_charge_or_503, quota_exceeded, with_quota_headers
from notify.api.schema import error_responses, linked_from
from notify.models import Scope


def _audience_from(raw: dict) -> tuple[str, dict]:
    """(kind, spec) from the request's `audience`, which names exactly one kind."""
    given = [kind for kind in ("user_ids", "segment", "all") if kind in raw]
    if len(given) != 1:
        raise ApiError(
            400, "invalid", 'Give exactly one of "user_ids", "segment" or "all".', field="audience"
        )
    kind = given[0]
    if kind == "all":
        if raw["all"] is not True:
            raise ApiError(400, "invalid", '"all" must be true.', field="audience.all")
        return AudienceKind.ALL, {}
    spec = {"user_ids": raw["user_ids"]} if kind == "user_ids" else raw["segment"]
    problem = audience_problem(kind, spec)
    if problem is not None:
        raise ApiError(400, "invalid_audience", problem.message, field=problem.field)
    if kind == "user_ids":  # a repeated id is one member
        spec = {"user_ids": list(dict.fromkeys(spec["user_ids"]))}
    return kind, spec


class CampaignLaunchApi(APIView):
    required_scope = Scope.CAMPAIGNS_WRITE
    # An audience of user ids is large: the body limit is the campaign's own.
    body_limit_setting = "NOTIFY_CAMPAIGN_MAX_BODY_BYTES"

    @extend_schema(
        operation_id="launch_campaign",
        request=s.CampaignIn,
        parameters=[
            OpenApiParameter(
                "dry_run",
                bool,
                description="true: store and send nothing; answer the campaign's estimate.",
            )
        ],
        responses={
            202: s.CampaignLaunchedOut,
            200: OpenApiResponse(s.CampaignEstimateOut, description="The estimate (dry run)."),
            **error_responses(422),
        },
        summary="Launch a campaign (answers at once, the fan-out runs as a task), or with "
        "dry_run=true estimate it.",
    )
    def post(self, request: Request) -> Response:
        dry_run = _dry_run(request)
        data_in = s.CampaignIn(data=request.data)
        if not data_in.is_valid():
            field, message, _ = first_validation_error(data_in.errors)
            raise ApiError(400, "invalid", message, field=field or None)
        data = data_in.validated_data
        category = category_or_422(data["category"])
        if not category.marketing or category.mandatory:
            raise ApiError(
                400,
                "not_marketing",
                f"Campaigns send marketing categories; {category.key!r} is not one.",
                field="category",
            )
        category_allowed(request.user.api_key, category)
        payload_fits(category, data["payload"])
        kind, spec = _audience_from(request.data.get("audience") or {})
        if dry_run:  # nothing stored, nothing charged against the quota
            probe = Campaign(
                category=category,
                payload=data["payload"],
                audience_kind=kind,
                audience_spec=spec,
                send_rate=data.get("send_rate"),
                local_time=data.get("local_time"),
            )
            estimate = campaign_estimate(campaign=probe)
            return Response(s.CampaignEstimateOut(estimate.as_document()).data)
        # The audience counts against the producer's daily campaign quota, whole or not
        # at all; counted (one query for a segment or everyone) only when a quota applies.
        charge = campaign_charge_or_503(
            producer=request.user.producer,
            count_audience=lambda: audience_size_at_launch(kind=kind, spec=spec, category=category),
        )
        if charge is not None and charge.refused:
            return quota_exceeded(charge)
        campaign = campaign_launch(
            name=data["name"],
            category=category,
            payload=data["payload"],
            audience_kind=kind,
            audience_spec=spec,
            send_at=data.get("send_at"),
            producer=request.user.producer,
            send_rate=data.get("send_rate"),
            local_time=data.get("local_time"),
        )
        launched = Response({"campaign_id": campaign.pk}, status=status.HTTP_202_ACCEPTED)
        return with_quota_headers(launched, charge)


def _dry_run(request: Request) -> bool:
    """The `dry_run` query flag: true or false (absent: false); anything else is a 400."""
    raw = request.query_params.get("dry_run", "false").lower()
    if raw not in ("true", "false"):
        raise ApiError(400, "invalid", "dry_run is true or false.", field="dry_run")
    return raw == "true"


def _own_campaign(request: Request, campaign_id: int) -> Campaign:
    campaign = (
        Campaign.objects.select_related("category")
        .filter(pk=campaign_id, producer=request.user.producer)
        .first()
    )
    if campaign is None:
        raise ApiError(404, "not_found", f"No campaign {campaign_id}.")
    return campaign


def _campaign_document(campaign: Campaign) -> dict:
    progress = campaign_progress(campaign)
    return {
        "campaign_id": campaign.pk,
        "name": campaign.name,
        "category": campaign.category.key,
        "status": campaign.status,
        "send_at": campaign.send_at,
        "send_rate": campaign.send_rate,
        "local_time": campaign.local_time,
        "launched_at": campaign.launched_at,
        "audience_size": progress.audience_size,
        "created": progress.created,
        "members": progress.members,
        "deliveries": [
            {"status": status_, "reason": reason, "count": count}
            for status_, reason, count in progress.deliveries
        ],
        "email": progress.email,
        "providers": progress.providers,
    }


class CampaignDetailApi(APIView):
    required_scope = Scope.CAMPAIGNS_WRITE

    @extend_schema(
        operation_id="get_campaign",
        extensions=linked_from(
            "launch_campaign", ("202",), campaign_id="$response.body#/campaign_id"
        ),
        responses={200: s.CampaignOut},
        summary="A campaign's status and progress.",
    )
    def get(self, request: Request, campaign_id: int) -> Response:
        campaign = _own_campaign(request, campaign_id)
        return Response(s.CampaignOut(_campaign_document(campaign)).data)


def _control(request: Request, campaign_id: int, action: Callable[..., int]) -> Response:
    campaign = _own_campaign(request, campaign_id)
    try:
        action(campaign_id=campaign.pk)
    except CampaignStateError as error:
        raise ApiError(409, "campaign_state", str(error)) from None
    campaign.refresh_from_db()
    return Response(s.CampaignOut(_campaign_document(campaign)).data)


class CampaignPauseApi(APIView):
    required_scope = Scope.CAMPAIGNS_WRITE

    @extend_schema(
        operation_id="pause_campaign",
        extensions=linked_from(
            "launch_campaign", ("202",), campaign_id="$response.body#/campaign_id"
        ),
        request=None,
        responses={200: s.CampaignOut, **error_responses(409)},
        summary="Pause a campaign.",
    )
    def post(self, request: Request, campaign_id: int) -> Response:
        return _control(request, campaign_id, campaign_pause)


class CampaignResumeApi(APIView):
    required_scope = Scope.CAMPAIGNS_WRITE

    @extend_schema(
        operation_id="resume_campaign",
        extensions=linked_from(
            "launch_campaign", ("202",), campaign_id="$response.body#/campaign_id"
        ),
        request=None,
        responses={200: s.CampaignOut, **error_responses(409)},
        summary="Resume a campaign.",
    )
    def post(self, request: Request, campaign_id: int) -> Response:
        return _control(request, campaign_id, campaign_resume)


class CampaignCancelApi(APIView):
    required_scope = Scope.CAMPAIGNS_WRITE

    @extend_schema(
        operation_id="cancel_campaign",
        extensions=linked_from(
            "launch_campaign", ("202",), campaign_id="$response.body#/campaign_id"
        ),
        request=None,
        responses={200: s.CampaignOut, **error_responses(409)},
        summary="Cancel a campaign.",
    )
    def post(self, request: Request, campaign_id: int) -> Response:
        return _control(request, campaign_id, campaign_cancel)
