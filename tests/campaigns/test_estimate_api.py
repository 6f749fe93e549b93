"""The estimate before launch: `POST /v1/campaigns?dry_run=true` and the launch page's
*Estimate* button answer it and store nothing; other teams are refused."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Permission, User
from django.test import Client
from rest_framework.test import APIClient

from campaigns.models import Campaign
from notify.models import Notification
from tests.campaigns.conftest import campaign_body, orders_team_client, seed_recipients

pytestmark = pytest.mark.django_db


def test_a_dry_run_answers_the_estimate_and_launches_nothing(api, promo_data):
    seed_recipients(12, prefix="dry")
    seed_recipients(3, prefix="nocons", consent=False, locale="ru")
    response = api.post(
        "/v1/campaigns?dry_run=true",
        campaign_body(audience={"segment": {"has_email": True}}, send_rate=3),
        format="json",
    )
    assert response.status_code == 200, response.content
    estimate = response.json()
    assert estimate["audience"] == 15
    assert estimate["rate"] == 3
    assert estimate["duration_seconds"] == pytest.approx(15 / 3)
    email = next(c for c in estimate["channels"] if c["channel"] == "email")
    assert (email["send"], email["suppressed"]) == (12, {"no_consent": 3})
    locales = {(s["locale"], s["channel"]) for s in estimate["samples"]}
    assert ("en", "email") in locales and ("ru", "email") in locales
    assert not Campaign.objects.exists() and not Notification.objects.exists()


@pytest.mark.parametrize(
    ("query", "overrides", "field"),
    [
        ("dry_run=maybe", {}, "dry_run"),
        ("dry_run=true", {"send_rate": 0}, "send_rate"),
        ("dry_run=true", {"send_rate": 1e9}, "send_rate"),
        ("dry_run=true", {"local_time": "25:00"}, "local_time"),
        ("dry_run=true", {"audience": {"user_ids": []}}, "audience.user_ids"),
    ],
)
def test_a_dry_run_bounds_its_inputs(api, promo_data, query, overrides, field):
    response = api.post(f"/v1/campaigns?{query}", campaign_body(**overrides), format="json")
    assert response.status_code == 400, response.content
    assert response.json()["error"]["field"] == field
    assert not Campaign.objects.exists()


def test_another_teams_key_is_refused_a_dry_run_of_our_category(api, promo_data):
    seed_recipients(5, prefix="ours")
    response = orders_team_client().post(
        "/v1/campaigns?dry_run=true", campaign_body(), format="json"
    )
    assert response.status_code == 403
    assert response.json()["error"]["code"] == "category_not_allowed"
    assert "audience" not in response.json()
    anonymous = APIClient().post("/v1/campaigns?dry_run=true", campaign_body(), format="json")
    assert anonymous.status_code == 401


def test_a_local_time_campaign_is_launched_with_its_time_and_rate(api, promo_data):
    response = api.post(
        "/v1/campaigns", campaign_body(local_time="10:00", send_rate=20), format="json"
    )
    assert response.status_code == 202, response.content
    campaign = Campaign.objects.get(pk=response.json()["campaign_id"])
    assert (str(campaign.local_time), campaign.send_rate) == ("10:00:00", 20)
    document = api.get(f"/v1/campaigns/{campaign.pk}").json()
    assert (document["local_time"], document["send_rate"]) == ("10:00:00", 20)


@pytest.fixture
def manager(promo_data) -> Client:
    user = User.objects.create_user("marketing", "m@example.com", "pw", is_staff=True)
    user.user_permissions.add(
        *Permission.objects.filter(
            codename__in=["launch_campaign", "add_campaign", "view_campaign", "change_campaign"]
        )
    )
    client = Client()
    client.force_login(user)
    return client


def test_the_launch_page_shows_the_estimate_escaped_and_launches_nothing(manager):
    from notify.models import Category

    seed_recipients(4, prefix="en")
    seed_recipients(2, prefix="ru", locale="ru")
    promo = Category.objects.get(key="promo.weekly")
    page = manager.post(
        "/admin/campaigns/campaign/add/",
        {
            "name": "Spring",
            "category": promo.pk,
            "payload": '{"headline": "<script>alert(1)</script>", "url": "https://x.example"}',
            "audience_kind": "all",
            "audience_spec": "{}",
            "send_rate": "2",
            "_estimate": "Estimate",
        },
    )
    assert page.status_code == 200
    html = page.content.decode()
    assert 'id="campaign-estimate"' in html
    assert (
        '<tr data-estimate="email:send"><td>email</td><td>send</td><td class="nt-count">6' in html
    )
    assert 'data-sample="ru:email"' in html and "Смотреть предложения" in html
    assert "<script>alert(1)</script>" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert 'value="Spring"' in html  # the form comes back filled in
    assert not Campaign.objects.exists()


def test_a_staff_member_who_may_not_launch_is_refused_the_estimate(promo_data):
    from notify.models import Category

    viewer = User.objects.create_user("viewer", "v@example.com", "pw", is_staff=True)
    viewer.user_permissions.add(*Permission.objects.filter(codename="view_campaign"))
    client = Client()
    client.force_login(viewer)
    promo = Category.objects.get(key="promo.weekly")
    page = client.post(
        "/admin/campaigns/campaign/add/",
        {"name": "Spring", "category": promo.pk, "payload": "{}", "audience_kind": "all",
         "audience_spec": "{}", "_estimate": "Estimate"},
    )  # fmt: skip
    assert page.status_code == 403
    assert not Campaign.objects.exists()
