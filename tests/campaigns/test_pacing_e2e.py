"""Campaign pacing on the real services: a paced campaign takes as long as its rate says
while login codes still go at once, its estimate foretells that, and a local-time
campaign reaches each person at their own 10:00 (with NOTIFY_CAMPAIGN_TIME_SCALE
compressing the hours into seconds), after their quiet hours when 10:00 falls in them,
and people who share a 10:00 take turns at the campaign's rate from it."""

from __future__ import annotations

import time
import uuid
from collections import Counter
from datetime import UTC, datetime, timedelta
from datetime import time as clock
from zoneinfo import ZoneInfo

import pytest

from campaigns.models import Campaign
from deliveries.models import Delivery
from notify.models import Notification, Recipient
from preferences.models import QuietHours
from tests.campaigns.conftest import campaign_body, seed_recipients
from tests.waiting import wait_for

pytestmark = pytest.mark.e2e

AUDIENCE = 600
RATE = 20


def mails_to(smtp, prefix: str) -> list:
    return [m for m in smtp.received if m.rcpt_tos[0].startswith(prefix)]


def send_login_code(api, user_id: str) -> float:
    response = api.post(
        "/v1/notifications",
        {
            "event_id": str(uuid.uuid4()),
            "user_id": user_id,
            "category": "security.login_code",
            "payload": {"code": "424242"},
        },
        format="json",
    )
    assert response.status_code == 202, response.content
    return time.time()


def test_a_paced_campaign_takes_its_rates_time_and_login_codes_still_go_at_once(
    api, promo_data, pipeline, workers_with
):
    smtp = pipeline
    # As deployed: the campaign's class and the login codes' class in their own workers.
    workers_with(queues="low", pool="threads", concurrency=8)
    workers_with(queues="high,medium", pool="threads", concurrency=4)
    seed_recipients(AUDIENCE, prefix="pace")
    Recipient.objects.create(user_id="otp-user", email="otp-user@example.com", locale="en")
    body = campaign_body(name="Paced", audience={"segment": {"has_email": True}}, send_rate=RATE)

    estimate = api.post("/v1/campaigns?dry_run=true", body, format="json").json()
    email = next(c for c in estimate["channels"] if c["channel"] == "email")
    # The login-code person has no marketing consent: the gate holds it back.
    assert (email["send"], email["suppressed"]) == (AUDIENCE, {"no_consent": 1})

    response = api.post("/v1/campaigns", body, format="json")
    assert response.status_code == 202, response.content
    started = time.time()

    # Login codes while the campaign runs: each reaches its mailbox at once.
    delays = []
    while len(mails_to(smtp, "pace-")) < AUDIENCE * 0.8:
        sent = send_login_code(api, "otp-user")
        count = len(delays) + 1
        mail = wait_for(
            lambda count=count: mails_to(smtp, "otp-user")[count - 1 : count],
            timeout=10,
            what="the login code",
        )[0]
        delays.append(mail.received_at - sent)
        time.sleep(2)
    assert len(delays) >= 5
    assert max(delays) < 2.0, delays  # not queued behind the campaign's emails

    wait_for(lambda: len(mails_to(smtp, "pace-")) == AUDIENCE, timeout=60, what="every email")
    received = sorted(m.received_at for m in mails_to(smtp, "pace-"))
    took = received[-1] - started
    expected = AUDIENCE / RATE  # 30 s
    assert expected * 0.8 <= took <= expected * 1.2, took
    # Paced, not a burst then a wait: a third of the time brings about a third of them.
    third = sum(1 for at in received if at - started <= expected / 3)
    assert third <= AUDIENCE / 3 + 2 * RATE, third
    assert abs(estimate["duration_seconds"] - took) <= 0.25 * took, (estimate, took)
    campaign = Campaign.objects.get(pk=response.json()["campaign_id"])
    assert campaign.status == "done"
    # The last member due may be one with nothing to send (the login-code person, no
    # consent): its route can come a moment after the last email.
    wait_for(
        lambda: (
            not Notification.objects.filter(
                event_id__startswith=campaign.event_id_prefix, routed_at__isnull=True
            ).exists()
        ),
        timeout=10,
        what="every campaign notification routed",
    )
    assert campaign_outcomes(campaign) == estimated_outcomes(estimate)


def estimated_outcomes(estimate: dict) -> Counter:
    """(channel, send | deferred | digested | delayed | expired | reason) → count, as the
    estimate says."""
    outcomes = Counter()
    for c in estimate["channels"]:
        for outcome in ("send", "deferred", "digested", "delayed", "expired"):
            outcomes[(c["channel"], outcome)] += c[outcome]
        for reason, count in c["suppressed"].items():
            outcomes[(c["channel"], reason)] += count
    return +outcomes  # without the zeros


def campaign_outcomes(campaign: Campaign) -> Counter:
    """The same, of the deliveries the campaign made (sent ones count as `send`)."""
    rows = Delivery.objects.filter(
        notification__event_id__startswith=campaign.event_id_prefix
    ).values_list("channel", "status", "reason")
    return Counter((channel, _outcome(status, reason)) for channel, status, reason in rows)


def _outcome(status: str, reason: str) -> str:
    if status == "suppressed":
        return reason
    if status == "deferred":
        return "delayed" if reason == "delayed_if_unread" else "deferred"
    return {"digesting": "digested", "digested": "digested", "expired": "expired"}.get(
        status, "send"
    )


def zone_with_ten_in(hours: int, now: datetime) -> str:
    """A fixed-offset zone whose next 10:00 is between `hours` and `hours + 1` from now."""
    for offset in range(-12, 15):
        zone = f"Etc/GMT{'-' if offset >= 0 else '+'}{abs(offset)}"  # Etc signs are reversed
        local = now.astimezone(ZoneInfo(zone))
        ten = local.replace(hour=10, minute=0, second=0, microsecond=0)
        if ten < local:
            ten += timedelta(days=1)
        if timedelta(hours=hours) <= ten - local < timedelta(hours=hours + 1):
            return zone
    raise AssertionError(f"no zone has 10:00 in {hours} h")


def next_local(at: clock, zone: str, now: datetime) -> datetime:
    local = now.astimezone(ZoneInfo(zone))
    moment = local.replace(hour=at.hour, minute=at.minute, second=0, microsecond=0)
    return moment if moment >= local else moment + timedelta(days=1)


def test_a_local_time_campaign_reaches_each_person_at_their_ten_oclock(
    api, promo_data, pipeline, workers_with
):
    smtp = pipeline
    scale = 720  # an hour in five seconds
    workers_with(NOTIFY_CAMPAIGN_TIME_SCALE=str(scale), pool="threads", concurrency=4)
    now = datetime.now(UTC)
    zones = {f"z{hours}": zone_with_ten_in(hours, now) for hours in (1, 2, 4)}
    for prefix, zone in zones.items():
        seed_recipients(1, prefix=prefix, timezone=zone)
    # Quiet 09:45 to 11:00 in their zone: 10:00 falls inside, so 11:00 it is. (It is 07:xx
    # there now, so the gate's own quiet hours do not hold the email back at routing.)
    [quiet] = seed_recipients(1, prefix="quiet", timezone=zones["z2"])
    QuietHours.objects.filter(recipient=quiet).update(start=clock(9, 45), end=clock(11, 0))

    response = api.post("/v1/campaigns", campaign_body(local_time="10:00"), format="json")
    assert response.status_code == 202, response.content
    wait_for(lambda: len(smtp.received) == 4, timeout=40, what="four emails")
    start = Campaign.objects.get(pk=response.json()["campaign_id"]).paced_from
    expected = {
        "z1": next_local(clock(10), zones["z1"], start),
        "z2": next_local(clock(10), zones["z2"], start),
        "z4": next_local(clock(10), zones["z4"], start),
        "quiet": next_local(clock(11), zones["z2"], start),
    }
    for prefix, local in expected.items():
        due = start.timestamp() + (local - start).total_seconds() / scale
        [mail] = mails_to(smtp, f"{prefix}-")
        # Not before their time; after it, the relay's poll and the send.
        assert due - 0.2 <= mail.received_at <= due + 3, (prefix, mail.received_at - due)
    by_time = sorted(smtp.received, key=lambda m: m.received_at)
    order = [m.rcpt_tos[0].split("-")[0] for m in by_time]
    assert order == ["z1", "z2", "quiet", "z4"]


def test_people_who_share_a_ten_oclock_take_turns_at_the_rate_from_it(
    api, promo_data, pipeline, workers_with
):
    smtp = pipeline
    scale = 720  # an hour in five seconds
    workers_with(NOTIFY_CAMPAIGN_TIME_SCALE=str(scale), pool="threads", concurrency=8)
    now = datetime.now(UTC)
    zone = zone_with_ten_in(1, now)
    people = 200
    seed_recipients(people, prefix="turn", timezone=zone)
    body = campaign_body(name="Turns", local_time="10:00", send_rate=RATE)
    response = api.post("/v1/campaigns", body, format="json")
    assert response.status_code == 202, response.content
    wait_for(lambda: len(mails_to(smtp, "turn-")) == people, timeout=60, what="every email")
    start = Campaign.objects.get(pk=response.json()["campaign_id"]).paced_from
    ten = start.timestamp() + (next_local(clock(10), zone, start) - start).total_seconds() / scale
    received = sorted(m.received_at for m in mails_to(smtp, "turn-"))
    # The first at their 10:00 (then the relay's poll and the send) ...
    assert ten - 0.2 <= received[0] <= ten + 3, received[0] - ten
    # ... and the rest at the rate from it, not all at once: 200 at 20 a second, 10 s.
    expected = people / RATE
    took = received[-1] - ten
    assert expected * 0.8 <= took <= expected * 1.2, took
    half = sum(1 for at in received if at - ten <= expected / 2)
    assert half <= people / 2 + 2 * RATE, half
