"""The admin's delivery-analytics charts in a real browser (Debian's Chromium through
Playwright): events queued as the pipeline leaves them, shipped into a real store, drawn
by the vendored Chart.js, each chart beside a table holding the same numbers; team-given
names shown as text, never run; staff without `analytics.see_reports` refused.
Screenshots in artifacts/."""

from __future__ import annotations

import re
import subprocess
from datetime import timedelta

import pytest
from django.contrib.auth.models import Permission, User
from django.test import Client
from django.utils import timezone

from analytics.store.shipper import batch_ship
from campaigns.models import Campaign
from notify.models import Category, Producer
from tests.analytics.conftest import queue_events
from tests.conftest import screenshot
from tests.processes import ROOT

# Names teams choose, made to run if a page ever wrote them as HTML.
HOSTILE_CAMPAIGN = "<img src=x onerror=\"window.__pwned='campaign'\"> Winter & “sale”"
HOSTILE_CATEGORY = "<img src=y onerror=\"window.__pwned='category'\">"
HOSTILE_PROVIDER = "<script>window.__pwned='p'</script>"  # providers: 40 at most
PAGES = ("", "categories/", "providers/")
BASE = "/admin/analytics/deliveryreports/"

# What the chart and its table hold, read in the page: Chart.js's own data (what it drew)
# and the table's cells as text.
CHART_AND_TABLE = """(id) => {
  const canvas = document.getElementById(id + "-canvas");
  const chart = Chart.getChart(canvas);
  const table = document.getElementById(id + "-table");
  const cells = (row) => [...row.cells].map((cell) => cell.textContent.trim());
  return {
    labels: chart.data.labels,
    datasets: chart.data.datasets.map((d) => ({ label: d.label, data: d.data })),
    drawn: chart.data.datasets.map((_, i) => chart.getDatasetMeta(i).data.length),
    width: canvas.width,
    ariaLabel: canvas.getAttribute("aria-label"),
    head: cells(table.tHead.rows[0]).slice(1),
    rows: [...table.tBodies[0].rows].map(cells),
  };
}"""


@pytest.fixture(scope="module", autouse=True)
def chart_library():
    """Chart.js where the pages load it from, as the bootstrap leaves it (the script is a
    no-op when it is there and the lock unchanged)."""
    done = subprocess.run(
        ["bash", "scripts/vendor_static.sh"], cwd=ROOT, capture_output=True, text=True
    )
    if done.returncode != 0:
        pytest.fail(f"scripts/vendor_static.sh failed:\n{done.stdout}{done.stderr}")


def _staff(username: str, *, may_view: bool) -> User:
    user = User.objects.create_user(username, password=f"pw-{username}", is_staff=True)
    if may_view:
        user.user_permissions.add(
            Permission.objects.get(content_type__app_label="analytics", codename="see_reports")
        )
    return user


def login(page, username: str) -> None:
    page.context.clear_cookies()
    page.goto(f"{page.base_url}/admin/login/?next=/admin/")
    page.fill("#id_username", username)
    page.fill("#id_password", f"pw-{username}")
    page.click("input[type=submit]")
    page.wait_for_selector("#site-name")


@pytest.fixture
def shipped(transactional_db, demo_data, store):
    """Two producers' events, queued and shipped into the store: a campaign's (email and
    in-app), a hostile category's SMS two days ago, a hostile provider's latencies and
    failures yesterday, and another producer's that no page of ours may show."""
    own = Producer.objects.create(name="Acme")
    other = Producer.objects.create(name="Zeta")
    campaign = Campaign.objects.create(
        name=HOSTILE_CAMPAIGN,
        producer=own,
        category=Category.objects.get(key="promo.weekly"),
        payload={},
        audience_kind="all",
        audience_spec={},
        launched_at=timezone.now(),
    )
    now = timezone.now()
    three_hours_ago = now - timedelta(hours=3)
    ours = {"producer_id": own.pk, "campaign_id": campaign.pk}
    queue_events(10, kind="accepted", **ours)
    queue_events(3, kind="suppressed", reason="no_consent", **ours)
    # Seven tries: two that failed three hours ago, five delivered now (a delivered row
    # stands for its try's `sent` too).
    queue_events(2, kind="sent", occurred_at=three_hours_ago, **ours)
    queue_events(5, kind="delivered", latency_ms=200, **ours)
    queue_events(2, kind="failed", reason="rejected", **ours)
    queue_events(1, kind="opened", **ours)
    inapp = {"channel": "inapp", "provider": "inapp", **ours}
    queue_events(4, kind="accepted", **inapp)
    queue_events(4, kind="delivered", latency_ms=50, **inapp)
    queue_events(2, kind="read", **inapp)
    sms = {"producer_id": own.pk, "channel": "sms", "occurred_at": now - timedelta(days=2)}
    queue_events(2, kind="delivered", category=HOSTILE_CATEGORY, provider="smpp", **sms)
    yesterday = {
        "producer_id": own.pk,
        "channel": "webpush",
        "provider": HOSTILE_PROVIDER,
        "occurred_at": now - timedelta(days=1),
    }
    for latency in range(10, 101, 10):
        queue_events(1, kind="delivered", latency_ms=latency, **yesterday)
    queue_events(2, kind="failed", reason="rejected", **yesterday)
    queue_events(9, kind="delivered", producer_id=other.pk, category="zeta.secret")
    assert batch_ship(store=store) > 0
    return {"campaign": campaign, "now": now, "sends": (three_hours_ago, now)}


def _number(text: str) -> float | None:
    return None if text == "—" else float(text)


def chart_and_table(page, chart_id: str) -> dict:
    """The chart's data as Chart.js holds it, checked cell by cell against its table."""
    seen = page.evaluate(CHART_AND_TABLE, chart_id)
    assert seen["width"] > 0 and seen["ariaLabel"]
    assert seen["drawn"] == [len(seen["labels"])] * len(seen["datasets"])  # every point drawn
    assert seen["head"] == [d["label"] for d in seen["datasets"]]
    assert [row[0] for row in seen["rows"]] == seen["labels"]
    for i, row in enumerate(seen["rows"]):
        assert [_number(cell) for cell in row[1:]] == [d["data"][i] for d in seen["datasets"]]
    return {d["label"]: dict(zip(seen["labels"], d["data"], strict=True)) for d in seen["datasets"]}


def _open(page, path: str) -> None:
    response = page.goto(f"{page.base_url}{BASE}{path}")
    assert response.status == 200, response.status
    for figure in page.query_selector_all("figure[data-chart]"):
        assert figure.get_attribute("data-rendered") == "true"  # drawn once the page loaded
    assert page.console.errors == []
    # No inline script runs here: a CSP of script-src 'self' would leave the page whole.
    inline = "[...document.scripts].filter((s) => !s.src && s.type !== 'application/json')"
    assert page.evaluate(f"{inline}.length") == 0


def _unrun(page) -> None:
    """No team-given name ran: nothing set the marker, and no element came from one."""
    assert page.evaluate("window.__pwned") is None
    assert (
        page.query_selector("#analytics-charts img, #analytics-charts script:not([type])") is None
    )


def test_each_chart_draws_the_stores_numbers_beside_a_table_of_the_same(browser_page, shipped):
    page = browser_page
    page.console = _Console(page)
    _staff("ana", may_view=True)
    login(page, "ana")
    campaign, now = shipped["campaign"], shipped["now"]

    # The admin index lists the pages; the index lists the campaign by its name, as text.
    assert page.get_by_role("link", name="Delivery reports").count() == 1
    page.goto(f"{page.base_url}{BASE}")
    assert page.get_by_role("link", name=HOSTILE_CAMPAIGN).count() == 1
    _unrun(page)

    # (a) The campaign: its funnel per channel and its sends per hour.
    _open(page, f"campaign/{campaign.pk}/")
    assert page.text_content("#campaign-name") == HOSTILE_CAMPAIGN
    funnel = chart_and_table(page, "campaign-funnel")
    assert {stage: funnel["email"][stage] for stage in ("audience", "suppressed", "sent")} == {
        "audience": 10,
        "suppressed": 3,
        "sent": 7,
    }
    assert (funnel["email"]["delivered"], funnel["email"]["failed"]) == (5, 2)
    assert (funnel["email"]["opened"], funnel["inapp"]["read"]) == (1, 2)
    sends = chart_and_table(page, "campaign-sends")
    first, last = (moment.strftime("%Y-%m-%d %H:00") for moment in shipped["sends"])
    assert list(sends) == ["email", "inapp"]  # in-app entries are tries too
    assert (sends["email"][first], sends["email"][last], sum(sends["email"].values())) == (2, 5, 7)
    assert len(sends["email"]) == 4  # the hours between, with none, are shown as none
    assert sum(sends["inapp"].values()) == 4
    _unrun(page)
    screenshot(page, "analytics-campaign-charts")

    # (b) Categories by channels per day, delivered by default, only this producer's.
    today = now.date()
    window = f"start={today - timedelta(days=6)}&end={today}"
    _open(page, f"categories/?{window}")
    stacked = chart_and_table(page, "categories-channels")
    day = today.isoformat()
    two_days_ago = (today - timedelta(days=2)).isoformat()
    assert stacked["promo.weekly · email"][day] == 5
    assert stacked["promo.weekly · inapp"][day] == 4
    assert stacked[f"{HOSTILE_CATEGORY} · sms"][two_days_ago] == 2
    assert sum(stacked[f"{HOSTILE_CATEGORY} · sms"].values()) == 2
    assert not any("zeta.secret" in label for label in stacked)  # another producer's
    _unrun(page)
    screenshot(page, "analytics-categories-channels")

    # (c) Each provider's latency percentiles and every provider's failure rate per day.
    _open(page, f"providers/?{window}")
    yesterday = (today - timedelta(days=1)).isoformat()
    hostile = page.get_by_role("heading", name=f"Latency of {HOSTILE_PROVIDER}")
    chart_id = hostile.get_attribute("id").removesuffix("-title")
    latency = chart_and_table(page, chart_id)
    assert latency["p50"][yesterday] == 55  # of 10, 20 … 100 ms
    assert latency["p50"][day] is None  # no delivery that day: a gap, "—" in the table
    assert 90 <= latency["p95"][yesterday] <= latency["p99"][yesterday] <= 100
    smtp_id = page.get_by_role("heading", name="Latency of smtp").get_attribute("id")
    smtp = chart_and_table(page, smtp_id.removesuffix("-title"))
    assert (smtp["p50"][day], smtp["p95"][day], smtp["p99"][day]) == (200, 200, 200)
    rates = chart_and_table(page, "provider-failure-rate")
    assert rates[HOSTILE_PROVIDER][yesterday] == round(100 * 2 / 12, 2)
    assert rates["smtp"][day] == round(100 * 2 / 7, 2)
    _unrun(page)
    screenshot(page, "analytics-providers")

    # The tables are reached by keyboard: Tab moves focus onto each table's region.
    page.focus("#id_latency")
    focused = set()
    for _ in range(40):
        page.keyboard.press("Tab")
        focused.add(page.evaluate("document.activeElement.getAttribute('aria-labelledby')"))
    assert {f"{chart_id}-caption", "provider-failure-rate-caption"} <= focused


def test_staff_without_the_permission_are_refused(browser_page, shipped):
    from notify.roles import support_group_ensure

    page = browser_page
    # Support reads every model of ours in admin: the charts still need their permission.
    _staff("sam", may_view=False).groups.add(support_group_ensure())
    login(page, "sam")
    assert page.get_by_role("link", name="Delivery reports").count() == 0
    for path in (*PAGES, f"campaign/{shipped['campaign'].pk}/"):
        response = page.goto(f"{page.base_url}{BASE}{path}")
        assert response.status == 403, path
        assert HOSTILE_CAMPAIGN not in page.content()
    screenshot(page, "analytics-charts-refused")

    # Without a login: to the login page. A non-staff user with the permission: likewise.
    anonymous = Client()
    answer = anonymous.get(f"{BASE}providers/")
    assert answer.status_code == 302 and re.search(r"/admin/login/", answer["Location"])
    insider = _staff("ivy", may_view=True)
    insider.is_staff = False
    insider.save()
    anonymous.force_login(insider)
    assert anonymous.get(f"{BASE}categories/").status_code == 302


class _Console:
    """Every uncaught page error, console error and failed load but the browser's own
    favicon request (a failed load is also logged to the console: it is counted once)."""

    def __init__(self, page) -> None:
        self.errors: list[str] = []
        page.on("pageerror", lambda error: self.errors.append(f"uncaught: {error}"))
        page.on("console", self._console)
        page.on("response", self._response)

    def _console(self, message) -> None:
        if message.type == "error" and not message.text.startswith("Failed to load resource"):
            self.errors.append(message.text)

    def _response(self, response) -> None:
        if response.status >= 400 and not response.url.endswith("/favicon.ico"):
            self.errors.append(f"{response.status} {response.url}")
