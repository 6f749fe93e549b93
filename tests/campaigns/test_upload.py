"""An audience uploaded in admin as a CSV: streamed into the database, duplicates kept
once, ids that name nobody counted and listed, a bad file refused with its line."""

from __future__ import annotations

import io
import json
import tracemalloc

import pytest
from django.contrib.auth.models import Group, User
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command

from campaigns.models import Campaign, CampaignMember
from campaigns.upload import UploadProblem, audience_upload_load, uploaded_user_ids
from notify.models import Category, Notification
from tests.campaigns.conftest import PROMO, fan_out_all, seed_recipients

pytestmark = pytest.mark.django_db

ADD = "/admin/campaigns/campaign/add/"


@pytest.fixture
def marketing(client, promo_data) -> User:
    call_command("create_roles", stdout=io.StringIO())
    user = User.objects.create_user("marketing", password="pw", is_staff=True)
    user.groups.set(Group.objects.filter(name="Campaign managers"))
    client.force_login(user)
    return user


def upload_form(content: bytes, **overrides) -> dict:
    return {
        "name": "Uploaded sale",
        "category": Category.objects.get(key="promo.weekly").pk,
        "payload": json.dumps(PROMO),
        "audience_kind": "upload",
        "audience_spec": "{}",
        "audience_file": SimpleUploadedFile("audience.csv", content, "text/csv"),
        "send_at_0": "",
        "send_at_1": "",
        **overrides,
    }


def test_an_uploaded_csv_is_the_audience_and_unknown_ids_are_listed(client, marketing):
    seed_recipients(5, prefix="up")
    csv = "\ufeffuser_id\nup-00000\nup-00001\n\nup-00001\n ghost-1 \nup-00003,extra\nghost-2\n"
    response = client.post(ADD, upload_form(csv.encode()))
    assert response.status_code == 302, response.content
    campaign = Campaign.objects.get()
    assert response["Location"].endswith(f"/{campaign.pk}/change/")  # to its progress
    assert (campaign.uploaded_count, campaign.unknown_count) == (5, 2)

    fan_out_all(campaign)
    reached = set(
        Notification.objects.filter(event_id__startswith=campaign.event_id_prefix).values_list(
            "recipient__user_id", flat=True
        )
    )
    assert reached == {"up-00000", "up-00001", "up-00003"}
    assert campaign.audience_size == 3

    page = client.get(response["Location"]).content.decode()
    assert "5 uploaded user ids; 2 name nobody" in page
    listing = client.get(f"/admin/campaigns/campaign/{campaign.pk}/unknown-ids.csv")
    assert b"".join(listing.streaming_content).decode().split() == ["ghost-1", "ghost-2"]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"user_id\n" + b"x" * 256 + b"\n", "Line 2: a user id is at most 255 characters."),
        (b"user_id\n\n", "The file holds no user ids."),
        (b"u-1\n\xff\xfe\n", "The file is not UTF-8 text"),
    ],
)
def test_a_bad_file_is_refused_on_the_form_and_nothing_is_launched(
    client, marketing, content, message
):
    response = client.post(ADD, upload_form(content))
    assert response.status_code == 200
    assert message in response.content.decode()
    assert not Campaign.objects.exists() and not CampaignMember.objects.exists()


def test_more_ids_than_the_limit_are_refused(client, marketing, settings):
    settings.NOTIFY_CAMPAIGN_MAX_UPLOAD_IDS = 3
    response = client.post(ADD, upload_form(b"a\nb\nc\nd\n"))
    assert "Line 4: at most 3 user ids per upload." in response.content.decode()
    assert not Campaign.objects.exists()


def test_a_file_is_refused_for_another_audience_kind(client, marketing):
    response = client.post(ADD, upload_form(b"a\n", audience_kind="all"))
    assert "A file is only read for an uploaded audience." in response.content.decode()


def test_a_large_upload_is_read_as_a_stream_not_held_in_memory(promo_data):
    """100,000 ids (about 1.2 MB) load with a Python heap that stays far below the
    file's size: the reader and COPY hold one line at a time."""
    from campaigns.fanout import campaign_launch

    count = 100_000
    data = io.BytesIO(b"".join(b"user-%07d\n" % i for i in range(count)))
    with pytest.raises(UploadProblem):  # the limit holds while streaming too
        list(uploaded_user_ids(io.BytesIO(b"a\nb\n"), limit=1))
    campaign = campaign_launch(
        name="big",
        category=Category.objects.get(key="promo.weekly"),
        payload=PROMO,
        audience_kind="upload",
        audience_spec={},
    )
    tracemalloc.start()
    loaded = audience_upload_load(campaign, data)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert (loaded.uploaded, loaded.unknown) == (count, count)
    assert CampaignMember.objects.filter(campaign=campaign).count() == count
    assert peak < len(data.getvalue()) / 4, f"peak {peak} bytes for a {len(data.getvalue())} file"
