"""A campaign that has not started, sent to a seed list of colleagues from its admin page:
every member gets the email its audience will get, marked as a test, and the campaign's
progress stays at zero. Sending needs `campaigns.send_to_seed_list` (the template editors
have it); without it there is no button and the send is refused."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth.models import Group, User
from django.contrib.messages import get_messages
from django.core.management import call_command
from django.urls import reverse
from django.utils import timezone

from campaigns.models import CampaignStatus, SeedList
from campaigns.selectors import campaign_progress
from deliveries.models import Delivery
from notify.models import Notification
from tests.campaigns.conftest import PROMO, launch, seed_recipients

pytestmark = pytest.mark.django_db

COLLEAGUES = ["ann@staff.example", "bob@staff.example", "cy@staff.example"]
MANAGERS = "Campaign managers"
EDITORS = "Templates: editor"


@pytest.fixture
def roles(promo_data):
    call_command("create_roles", stdout=open("/dev/null", "w"))  # noqa: SIM115


@pytest.fixture
def mail_to(smtp, settings):
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST, settings.EMAIL_PORT = "127.0.0.1", smtp.port
    return smtp


@pytest.fixture
def scheduled():
    """A campaign to consenting recipients, due tomorrow: not started."""
    seed_recipients(3)
    return launch(send_at=timezone.now() + timedelta(days=1))


def staff(client, username: str, *groups: str) -> User:
    user = User.objects.create_user(username, email=f"{username}@staff.example", is_staff=True)
    user.groups.set(Group.objects.filter(name__in=groups))
    client.force_login(user)
    return user


def test_a_scheduled_campaign_reaches_every_seed_member_and_its_progress_stays_at_zero(
    client, roles, scheduled, mail_to
):
    staff(client, "mia", MANAGERS, EDITORS)
    seeds = SeedList.objects.create(name="Marketing", addresses=COLLEAGUES)
    page = reverse("admin:campaigns_campaign_change", args=[scheduled.pk])
    send = reverse("admin:campaigns_seedlist_send_campaign", args=[scheduled.pk])
    assert send in client.get(page).content.decode()  # the button

    response = client.post(send, {"seed_list": seeds.pk, "locale": "en"})

    assert response.status_code == 302 and response.url == page
    assert [str(m) for m in get_messages(response.wsgi_request)] == [
        "Test email sent to 3 of seed list 'Marketing'."
    ]
    assert sorted(mail.rcpt_tos[0] for mail in mail_to.received) == COLLEAGUES
    # The campaign's own payload, in its category's published email, marked as a test.
    for mail in mail_to.received:
        assert mail.subject.startswith("[Test] ")
        assert PROMO["headline"] in mail.subject + mail.part("text/plain")
    scheduled.refresh_from_db()
    progress = campaign_progress(scheduled)
    assert (scheduled.status, scheduled.created_count) == (CampaignStatus.SCHEDULED, 0)
    assert (progress.created, progress.members, progress.deliveries) == (0, {}, [])
    assert not Notification.objects.exists() and not Delivery.objects.exists()


def test_a_campaign_manager_without_the_permission_has_no_button_and_is_refused(
    client, roles, scheduled, mail_to
):
    staff(client, "max", MANAGERS)
    seeds = SeedList.objects.create(name="Marketing", addresses=COLLEAGUES)
    page = reverse("admin:campaigns_campaign_change", args=[scheduled.pk])
    send = reverse("admin:campaigns_seedlist_send_campaign", args=[scheduled.pk])

    assert send not in client.get(page).content.decode()
    assert client.post(send, {"seed_list": seeds.pk, "locale": "en"}).status_code == 403
    assert not mail_to.received


def test_a_started_campaign_offers_no_seed_send_and_refuses_one(client, roles, mail_to):
    seed_recipients(2)
    running = launch()  # starts at once
    staff(client, "mia", MANAGERS, EDITORS)
    seeds = SeedList.objects.create(name="Marketing", addresses=COLLEAGUES)
    page = reverse("admin:campaigns_campaign_change", args=[running.pk])
    send = reverse("admin:campaigns_seedlist_send_campaign", args=[running.pk])

    assert send not in client.get(page).content.decode()
    response = client.post(send, {"seed_list": seeds.pk, "locale": "en"})

    assert [str(m) for m in get_messages(response.wsgi_request)] == [
        "This campaign has started: seed sends are for before it starts."
    ]
    assert not mail_to.received
