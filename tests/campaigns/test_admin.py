"""Campaigns in admin: launching needs `launch_campaign` (the Campaign managers group has
it), the change page shows progress, and pause/resume/cancel are actions."""

from __future__ import annotations

import json

import pytest
from django.contrib.auth.models import Group, User
from django.core.management import call_command

from campaigns.models import Campaign, CampaignStatus
from notify.models import Category
from tests.campaigns.conftest import PROMO, fan_out_all, seed_recipients

pytestmark = pytest.mark.django_db

ADD = "/admin/campaigns/campaign/add/"
CHANGELIST = "/admin/campaigns/campaign/"


def staff(client, username: str, *groups: str) -> User:
    user = User.objects.create_user(username, password="pw", is_staff=True)
    user.groups.set(Group.objects.filter(name__in=groups))
    client.force_login(user)
    return user


def launch_form(**overrides) -> dict:
    return {
        "name": "Spring sale",
        "category": Category.objects.get(key="promo.weekly").pk,
        "payload": json.dumps(PROMO),
        "audience_kind": "all",
        "audience_spec": "{}",
        "send_at_0": "",
        "send_at_1": "",
        **overrides,
    }


@pytest.fixture
def roles(promo_data):
    call_command("create_roles", stdout=open("/dev/null", "w"))  # noqa: SIM115


def test_the_campaign_managers_group_may_launch_and_others_may_not(client, roles):
    group = Group.objects.get(name="Campaign managers")
    assert set(group.permissions.values_list("codename", flat=True)) == {
        "view_campaign",
        "change_campaign",
        "launch_campaign",
    }
    staff(client, "support", "Support")
    assert client.get(ADD).status_code == 403

    manager = staff(client, "marketing", "Campaign managers")
    assert client.get(ADD).status_code == 200
    response = client.post(ADD, launch_form())
    assert response.status_code == 302, response.content
    campaign = Campaign.objects.get()
    assert (campaign.status, campaign.launched_by, campaign.producer.name) == (
        CampaignStatus.RUNNING,
        manager,
        "campaigns",
    )


def test_a_bad_payload_or_audience_is_shown_on_the_form(client, roles):
    staff(client, "marketing", "Campaign managers")
    response = client.post(
        ADD,
        launch_form(
            payload=json.dumps({"headline": "x"}),
            audience_kind="segment",
            audience_spec=json.dumps({"age": 3}),
        ),
    )
    assert response.status_code == 200
    assert b"payload.url" in response.content
    assert b"audience.segment.age" in response.content
    assert not Campaign.objects.exists()


def test_progress_on_the_change_page_and_the_control_actions(client, roles):
    staff(client, "marketing", "Campaign managers")
    seed_recipients(7)
    client.post(ADD, launch_form())
    campaign = Campaign.objects.get()
    fan_out_all(campaign)
    page = client.get(f"{CHANGELIST}{campaign.pk}/change/")
    assert page.status_code == 200
    assert b'audience <b>7</b> \xc2\xb7 created <b class="nt-created">7</b>' in page.content
    assert b"not_routed" in page.content

    for action, status in (("pause", "paused"), ("resume", "done"), ("cancel", "cancelled")):
        response = client.post(CHANGELIST, {"action": action, "_selected_action": [campaign.pk]})
        assert response.status_code == 302
        campaign.refresh_from_db()
        assert campaign.status == status
