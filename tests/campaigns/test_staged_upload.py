"""An uploaded audience is estimated before launch: *Estimate* stages the file (read and
bounded as a launch reads it), the estimate runs over the staged rows, and *Save*
launches exactly those rows, which then route as estimated. A staging is its staff
member's alone."""

from __future__ import annotations

import io
import json
import re
from collections import Counter

import pytest
from django.contrib.auth.models import Group, User
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command
from django.test import Client

from campaigns.erasure import person_erase
from campaigns.models import Campaign, CampaignMember, StagedMember, StagedUpload
from deliveries.models import Delivery
from deliveries.pipeline.routing import notifications_route
from notify.models import Category, ErasureVia
from tests.campaigns.conftest import (
    NOON_UTC,
    PROMO,
    campaign_notifications,
    fan_out_all,
    seed_recipients,
)

pytestmark = pytest.mark.django_db

ADD = "/admin/campaigns/campaign/add/"
CSV = b"user_id\nup-00000\nup-00001\nup-00001\nup-00002\nno-00000\nghost-1\n"


def campaign_manager(name: str) -> Client:
    user = User.objects.create_user(name, password="pw", is_staff=True)
    user.groups.set(Group.objects.filter(name="Campaign managers"))
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def managers(promo_data) -> tuple[Client, Client]:
    call_command("create_roles", stdout=io.StringIO())
    return campaign_manager("marketing"), campaign_manager("colleague")


def launch_form(**overrides) -> dict:
    return {
        "name": "Uploaded sale",
        "category": Category.objects.get(key="promo.weekly").pk,
        "payload": json.dumps(PROMO),
        "audience_kind": "upload",
        "audience_spec": "{}",
        "send_at_0": "",
        "send_at_1": "",
        **overrides,
    }


def csv_file(content: bytes = CSV) -> SimpleUploadedFile:
    return SimpleUploadedFile("audience.csv", content, "text/csv")


def shown(html: str) -> Counter:
    """(channel, outcome) → count, as the launch page's estimate shows it."""
    rows = re.findall(r'data-estimate="([^:"]+):([^"]+)".*?class="nt-count">(\d+)<', html)
    return +Counter({(channel, outcome): int(n) for channel, outcome, n in rows})


def test_an_uploaded_audience_is_estimated_then_launched_exactly_as_staged(managers):
    marketing, _ = managers
    seed_recipients(3, prefix="up")
    seed_recipients(1, prefix="no", consent=False)
    seed_recipients(2, prefix="other")  # not in the file

    page = marketing.post(ADD, launch_form(audience_file=csv_file(), _estimate="Estimate"))
    assert page.status_code == 200
    html = page.content.decode()
    assert not Campaign.objects.exists()  # nothing launched
    staged = StagedUpload.objects.get()
    assert (staged.uploaded_count, staged.unknown_count) == (5, 1)
    assert f'name="staged_upload" value="{staged.pk}"' in html  # the page carries it
    assert 'id="campaign-staged"' in html
    assert '<b class="nt-audience">4</b>' in html  # the known people in the file
    estimate = shown(html)
    assert estimate[("email", "send")] == 3
    assert estimate[("email", "no_consent")] == 1

    # Save without choosing the file again: the staged rows are the audience.
    response = marketing.post(ADD, launch_form(staged_upload=str(staged.pk)))
    assert response.status_code == 302, response.content
    campaign = Campaign.objects.get()
    members = set(
        CampaignMember.objects.filter(campaign=campaign).values_list("user_id", flat=True)
    )
    assert members == {"up-00000", "up-00001", "up-00002", "no-00000", "ghost-1"}
    assert (campaign.uploaded_count, campaign.unknown_count) == (5, 1)
    assert not StagedUpload.objects.exists() and not StagedMember.objects.exists()
    again = marketing.post(ADD, launch_form(staged_upload=str(staged.pk)))  # a double click
    assert "no longer staged" in again.content.decode()
    assert Campaign.objects.count() == 1

    fan_out_all(campaign)
    ids = list(campaign_notifications(campaign).values_list("pk", flat=True))
    notifications_route(notification_ids=ids, now=NOON_UTC)
    routed = Counter(
        (channel, reason if status == "suppressed" else "send")
        for channel, status, reason in Delivery.objects.filter(
            notification__event_id__startswith=campaign.event_id_prefix
        ).values_list("channel", "status", "reason")
    )
    assert +routed == estimate  # the campaign did what its estimate said


def test_a_staged_upload_is_refused_to_another_staff_member(managers):
    marketing, colleague = managers
    seed_recipients(3, prefix="up")
    marketing.post(ADD, launch_form(audience_file=csv_file(), _estimate="Estimate"))
    staged = StagedUpload.objects.get()
    for data in (launch_form(staged_upload=str(staged.pk)),
                 launch_form(staged_upload=str(staged.pk), _estimate="Estimate")):  # fmt: skip
        page = colleague.post(ADD, data)
        assert page.status_code == 200
        assert "no longer staged" in page.content.decode()
        assert 'id="campaign-estimate"' not in page.content.decode()
    assert not Campaign.objects.exists()
    assert StagedUpload.objects.filter(pk=staged.pk).exists()  # still the owner's to launch


def test_staging_is_bounded_as_the_upload_is(managers, settings):
    marketing, _ = managers
    settings.NOTIFY_CAMPAIGN_MAX_UPLOAD_IDS = 3
    page = marketing.post(ADD, launch_form(audience_file=csv_file(), _estimate="Estimate"))
    assert page.status_code == 200
    assert "at most 3 user ids per upload" in page.content.decode()
    assert not StagedUpload.objects.exists() and not StagedMember.objects.exists()


def test_an_upload_without_a_file_or_staging_is_refused(managers):
    marketing, _ = managers
    page = marketing.post(ADD, launch_form(_estimate="Estimate"))
    assert "Choose a CSV file of user ids." in page.content.decode()
    assert not StagedUpload.objects.exists()


def test_erasing_a_person_takes_them_out_of_a_staged_upload(managers):
    marketing, _ = managers
    seed_recipients(3, prefix="up")
    marketing.post(ADD, launch_form(audience_file=csv_file(), _estimate="Estimate"))
    person_erase(user_id="up-00001", via=ErasureVia.API, requested_by="test")
    staged = set(StagedMember.objects.values_list("user_id", flat=True))
    assert "up-00001" not in staged and "up-00000" in staged
