"""Marketing in a real browser: upload a CSV audience, launch, watch the progress move on
the campaign's page, pause (the emails stop), resume (the rest go out). Real worker,
relay and SMTP peer; screenshots in artifacts/."""

from __future__ import annotations

import io
import json

import pytest
from django.contrib.auth.models import Group, User
from django.core.management import call_command

from campaigns.models import Campaign, CampaignStatus
from tests.campaigns.conftest import PROMO, seed_recipients
from tests.conftest import screenshot
from tests.waiting import wait_for

pytestmark = pytest.mark.e2e

AUDIENCE = 60


@pytest.fixture
def marketing_login(promo_data) -> tuple[str, str]:
    call_command("create_roles", stdout=io.StringIO())
    user = User.objects.create_user("mara", password="campaign-pass", is_staff=True)
    user.groups.set(Group.objects.filter(name="Campaign managers"))
    return "mara", "campaign-pass"


def shown(page, selector: str) -> str:
    return page.inner_text(f"#campaign-progress {selector}").strip()


def member_count(page, status: str) -> int:
    cell = page.query_selector(f'#campaign-progress tr[data-member="{status}"] .nt-count')
    return int(cell.inner_text()) if cell else 0


def delivery_count(page, status: str) -> int:
    """Deliveries shown with `status`, whatever their reason."""
    cells = page.query_selector_all(f'#campaign-progress tr[data-delivery="{status}"] .nt-count')
    return sum(int(cell.inner_text()) for cell in cells)


def test_marketing_uploads_launches_watches_pauses_and_resumes(
    browser_page, marketing_login, pipeline, workers_with, tmp_path, settings
):
    settings.NOTIFY_CAMPAIGN_PROGRESS_POLL = 0.5
    smtp = pipeline
    smtp.handler.data_delay = 0.3  # a slow relay: the campaign takes seconds to drain
    workers_with(NOTIFY_CAMPAIGN_BATCH_SIZE="15", pool="threads", concurrency=2)
    seed_recipients(AUDIENCE, prefix="m")
    audience = tmp_path / "audience.csv"
    audience.write_text(
        "user_id\n" + "".join(f"m-{i:05d}\n" for i in range(AUDIENCE)) + "nobody-1\n"
    )

    page = browser_page
    username, password = marketing_login
    page.goto(f"{page.base_url}/admin/login/?next=/admin/campaigns/campaign/add/")
    page.fill("#id_username", username)
    page.fill("#id_password", password)
    page.click("input[type=submit]")

    page.fill("#id_name", "Spring sale")
    page.select_option("#id_category", label="promo.weekly")
    page.fill("#id_payload", json.dumps(PROMO))
    page.select_option("#id_audience_kind", "upload")
    page.set_input_files("#id_audience_file", str(audience))
    screenshot(page, "campaign-1-upload")
    page.click("input[name=_save]")

    page.wait_for_selector("#campaign-progress")
    assert f"{AUDIENCE + 1} uploaded user ids; 1 name nobody" in page.content()
    campaign = Campaign.objects.get()
    # The page refreshes itself: the delivered count climbs as the slow relay takes the
    # emails (a member counts as delivered once its in-app entry is written, which a
    # route writes for a whole batch at once; the emails go one by one).
    seen_delivered = {delivery_count(page, "delivered")}

    def delivered_shown_climbing() -> bool:
        seen_delivered.add(delivery_count(page, "delivered"))
        return len({n for n in seen_delivered if 0 < n < 2 * AUDIENCE}) >= 2

    wait_for(delivered_shown_climbing, timeout=60, what="the page never showed progress moving")
    screenshot(page, "campaign-2-running")

    page.click("button[data-action=pause]")
    page.wait_for_selector('#campaign-progress[data-status="paused"]')
    assert Campaign.objects.get().status == CampaignStatus.PAUSED
    # Pause stops new sends within a second; what was handed over before may finish.
    page.wait_for_timeout(1500)
    sent_at_pause = len(smtp.received)
    page.wait_for_timeout(3000)
    assert len(smtp.received) == sent_at_pause < AUDIENCE
    screenshot(page, "campaign-3-paused")

    page.click("button[data-action=resume]")
    wait_for(lambda: len(smtp.received) == AUDIENCE, timeout=90, what="the rest never went out")
    page.wait_for_selector('#campaign-progress[data-status="done"]', timeout=30_000)
    wait_for(
        lambda: member_count(page, "delivered") == AUDIENCE,
        timeout=30,
        what="the page never showed every member delivered",
    )
    screenshot(page, "campaign-4-done")
    assert {m.rcpt_tos[0] for m in smtp.received} == {
        f"m-{i:05d}@example.com" for i in range(AUDIENCE)
    }
    campaign.refresh_from_db()
    assert campaign.status == CampaignStatus.DONE
