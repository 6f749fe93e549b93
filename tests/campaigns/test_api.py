"""The campaign API: launch answers at once, progress and controls, and the errors."""

from __future__ import annotations

import pytest

from campaigns.fanout import campaign_fan_out
from campaigns.models import Campaign, CampaignStatus
from tests.campaigns.conftest import (
    campaign_body,
    campaign_notifications,
    fan_out_all,
    orders_team_client,
    seed_recipients,
)

pytestmark = pytest.mark.django_db


body = campaign_body


def error_of(response) -> dict:
    return response.json()["error"]


def test_launch_answers_202_at_once_and_the_fan_out_is_a_task(api, promo_data):
    seed_recipients(20)
    response = api.post("/v1/campaigns", body(), format="json")
    assert response.status_code == 202, response.content
    campaign = Campaign.objects.get(pk=response.json()["campaign_id"])
    assert campaign.status == CampaignStatus.RUNNING
    assert campaign.producer.name == "shop"
    assert not campaign_notifications(campaign).exists()  # nothing made in the request

    fan_out_all(campaign)
    document = api.get(f"/v1/campaigns/{campaign.pk}").json()
    assert document["status"] == "done"
    assert (document["audience_size"], document["created"]) == (20, 20)
    assert document["members"] == {"not_routed": 20}
    assert document["deliveries"] == []


def test_a_future_send_at_keeps_the_campaign_scheduled(api, promo_data):
    response = api.post("/v1/campaigns", body(send_at="2099-01-01T09:00:00Z"), format="json")
    assert response.status_code == 202
    document = api.get(f"/v1/campaigns/{response.json()['campaign_id']}").json()
    assert document["status"] == "scheduled"
    assert document["send_at"] == "2099-01-01T09:00:00Z"


def test_pause_resume_cancel_through_the_api(api, promo_data):
    seed_recipients(5)
    campaign_id = api.post("/v1/campaigns", body(), format="json").json()["campaign_id"]
    campaign_fan_out(campaign_id=campaign_id, batch_size=2)  # the first batch fixes the audience
    assert api.get(f"/v1/campaigns/{campaign_id}").json()["members"] == {
        "not_created": 3,
        "not_routed": 2,
    }
    paused = api.post(f"/v1/campaigns/{campaign_id}/pause")
    assert paused.status_code == 200 and paused.json()["status"] == "paused"
    again = api.post(f"/v1/campaigns/{campaign_id}/pause")
    assert again.status_code == 409
    assert error_of(again)["code"] == "campaign_state"
    assert api.post(f"/v1/campaigns/{campaign_id}/resume").json()["status"] == "running"
    cancelled = api.post(f"/v1/campaigns/{campaign_id}/cancel").json()
    assert cancelled["status"] == "cancelled"
    assert cancelled["members"] == {"cancelled": 5}
    assert api.post(f"/v1/campaigns/{campaign_id}/resume").status_code == 409


def test_another_producer_cannot_see_or_control_a_campaign(api, promo_data):
    from rest_framework.test import APIClient

    from notify.api_keys import api_key_issue

    campaign_id = api.post("/v1/campaigns", body(), format="json").json()["campaign_id"]
    other = APIClient()
    other_key = api_key_issue(producer_name="other", scopes=["campaigns:write"]).key
    other.credentials(HTTP_AUTHORIZATION=f"Bearer {other_key}")
    assert other.get(f"/v1/campaigns/{campaign_id}").status_code == 404
    assert other.post(f"/v1/campaigns/{campaign_id}/cancel").status_code == 404
    assert APIClient().get(f"/v1/campaigns/{campaign_id}").status_code == 401


@pytest.mark.parametrize(
    ("overrides", "status", "code", "field"),
    [
        ({"category": "order.shipped"}, 400, "not_marketing", "category"),
        ({"category": "security.login_code"}, 400, "not_marketing", "category"),
        ({"category": "nope"}, 422, "unknown_category", "category"),
        ({"payload": {"headline": "x"}}, 400, "invalid_payload", "payload.url"),
        ({"name": ""}, 400, "invalid", "name"),
        ({"audience": {}}, 400, "invalid", "audience"),
        ({"audience": {"all": True, "user_ids": ["a"]}}, 400, "invalid", "audience"),
        ({"audience": {"all": False}}, 400, "invalid", "audience.all"),
        ({"audience": {"user_ids": []}}, 400, "invalid_audience", "audience.user_ids"),
        ({"audience": {"user_ids": ["a", 7]}}, 400, "invalid_audience", "audience.user_ids"),
        ({"audience": {"segment": {"age": 30}}}, 400, "invalid_audience", "audience.segment.age"),
        (
            {"audience": {"segment": {"has_email": "yes"}}},
            400,
            "invalid_audience",
            "audience.segment.has_email",
        ),
        ({"send_at": "soon"}, 400, "invalid", "send_at"),
    ],
)
def test_invalid_launches_are_refused_with_the_error_shape(
    api, promo_data, overrides, status, code, field
):
    response = api.post("/v1/campaigns", body(**overrides), format="json")
    assert response.status_code == status, response.content
    assert error_of(response)["code"] == code
    assert error_of(response)["field"] == field
    assert not Campaign.objects.exists()


def test_a_user_id_list_is_bounded(api, promo_data, settings):
    settings.NOTIFY_CAMPAIGN_MAX_USER_IDS = 3
    ok = api.post("/v1/campaigns", body(audience={"user_ids": ["a", "b", "c"]}), format="json")
    assert ok.status_code == 202
    response = api.post(
        "/v1/campaigns", body(audience={"user_ids": ["a", "b", "c", "d"]}), format="json"
    )
    assert response.status_code == 400
    assert error_of(response) == {
        "code": "invalid_audience",
        "message": "At most 3 user ids per campaign.",
        "field": "audience.user_ids",
    }


def test_a_list_of_a_hundred_thousand_user_ids_is_taken_in_one_request(api, promo_data):
    user_ids = [f"customer-{i:06d}-of-the-spring-sale" for i in range(100_000)]  # ~3.6 MB
    response = api.post("/v1/campaigns", body(audience={"user_ids": user_ids}), format="json")
    assert response.status_code == 202, response.content[:300]
    campaign = Campaign.objects.get(pk=response.json()["campaign_id"])
    assert len(campaign.audience_spec["user_ids"]) == 100_000


def test_a_key_limited_to_other_categories_cannot_launch(promo_data):
    response = orders_team_client().post("/v1/campaigns", body(), format="json")
    assert response.status_code == 403
    assert error_of(response)["code"] == "category_not_allowed"
