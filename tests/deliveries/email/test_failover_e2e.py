"""Provider failover within the email channel on real processes: workers send through
`NOTIFY_EMAIL_PROVIDERS=postmark,smtp`, the Postmark peer as the primary and the SMTP
peer as the secondary.

- The primary answers 503 to everything: login codes and order emails go out through
  SMTP within seconds, each once, the attempt rows naming both providers; when the
  primary recovers, new email goes to it again within one breaker interval.
- The primary takes the message and hangs: a login code (its category puts speed before
  a rare duplicate) is sent by SMTP before its deadline; a marketing email is not sent
  elsewhere (it stays with the primary, which may have taken it).
"""

from __future__ import annotations

import time
from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.utils import timezone

from deliveries.models import Delivery, DeliveryAttempt, DeliveryStatus
from tests.deliveries.email.test_esp_e2e import notify
from tests.peers import postmark
from tests.waiting import wait_for

ORDER = {"order_number": "A-1", "delivery_date": "2026-12-03", "items_count": 1}
PROMO = {"headline": "Winter sale", "url": "https://shop.example/sale"}
LOGIN = {"code": "482913"}
COOLDOWN = 3.0  # the workers' breaker interval here (seconds)
CALL_DEADLINE = 2.0  # the workers' ESP call deadline here (seconds)


@pytest.fixture
def failover_workers(postmark_peer, pipeline, workers_with, smtp):
    """Workers with Postmark first and SMTP second; a breaker that opens after three
    failures and half-opens after COOLDOWN seconds."""
    postmark_peer.reset()
    workers_with(
        NOTIFY_EMAIL_PROVIDERS="postmark,smtp",
        POSTMARK_SERVER_TOKEN=postmark.TOKEN,
        POSTMARK_API_URL=postmark_peer.url,
        NOTIFY_BREAKER_FAILURES="3",
        NOTIFY_BREAKER_COOLDOWN=str(COOLDOWN),
        NOTIFY_ESP_CALL_DEADLINE=str(CALL_DEADLINE),
    )
    yield postmark_peer
    postmark_peer.reset()


def delivered(delivery: Delivery, timeout: float = 30) -> Delivery:
    def check():
        delivery.refresh_from_db()
        return delivery.status == DeliveryStatus.DELIVERED and delivery

    return wait_for(check, timeout=timeout, what=f"delivery {delivery.pk} delivered")


def providers_of(delivery: Delivery) -> list[tuple[str, str]]:
    attempts = DeliveryAttempt.objects.filter(delivery_id=delivery.pk).order_by("number")
    return [(a.provider, a.outcome) for a in attempts]


def smtp_copies(smtp, delivery: Delivery) -> int:
    """How many times the SMTP peer took this delivery's message (by the Message-ID each
    SMTP try gives it, the provider message id its attempt rows keep)."""
    ids = set(
        DeliveryAttempt.objects.filter(delivery_id=delivery.pk, provider="smtp")
        .exclude(provider_message_id="")
        .values_list("provider_message_id", flat=True)
    )
    ids |= {delivery.provider_message_id} if delivery.provider_message_id else set()
    return sum(1 for mail in smtp.received if str(mail.message["Message-ID"]) in ids)


def test_an_outage_of_the_primary_sends_everything_through_the_secondary_once(
    api, pat, failover_workers, smtp
):
    """Postmark answers 503 to everything: each login code and order email goes out once
    through SMTP, within 10 s of its acceptance; when Postmark is back, new email goes to
    it again within one breaker interval."""
    failover_workers.down = (503, {"ErrorCode": 0, "Message": "Service unavailable"}, {})
    sent = [notify(api, "security.login_code", LOGIN) for _ in range(2)]
    sent += [notify(api, "order.shipped", ORDER) for _ in range(3)]
    for delivery in sent:
        delivered(delivery)
        took = delivery.finished_at - delivery.accepted_at
        assert took < timedelta(seconds=10), took
        assert providers_of(delivery)[-1] == ("smtp", "delivered")
    assert failover_workers.received == []
    assert all(smtp_copies(smtp, d) == 1 for d in sent)  # each exactly once
    assert len(smtp.received) == len(sent)
    tried = {provider for d in sent for provider, _ in providers_of(d)}
    assert tried == {"postmark", "smtp"}, "the attempt rows name both providers"
    metrics = Client().get("/metrics").content.decode()
    assert f'notify_delivered_by_provider{{channel="email",provider="smtp"}} {len(sent)}.0' in (
        metrics
    )
    # Support's timeline of the person shows each try's provider.
    staff = Client()
    staff.force_login(User.objects.create_superuser("support", "s@example.com", "pw"))
    page = staff.get(f"/admin/notify/recipient/{pat.pk}/change/").content.decode()
    assert 'data-provider="postmark"' in page and 'data-provider="smtp"' in page

    failover_workers.down = None  # recovered
    back_at = timezone.now()
    again = notify(api, "order.shipped", ORDER)
    delivered(again)
    # The breaker half-opens within COOLDOWN; a new email meanwhile may still fail over.
    while providers_of(again)[-1][0] != "postmark":
        assert timezone.now() - back_at < timedelta(seconds=COOLDOWN + 10), "never returned"
        time.sleep(0.2)
        again = delivered(notify(api, "order.shipped", ORDER))
    # The first email back on the primary was accepted within one breaker interval of
    # the recovery (and a second for the probe's round).
    assert again.accepted_at - back_at <= timedelta(seconds=COOLDOWN + 1)
    assert len(failover_workers.received) == 1


def test_a_hanging_primary_does_not_hold_a_login_code_nor_duplicate_marketing(
    api, pat, failover_workers, smtp
):
    """Postmark takes the message and never answers: the login code goes through SMTP
    once the call's deadline cut the primary off, well before the code's own deadline;
    the marketing email is not sent through SMTP (Postmark may have taken it): it stays
    with Postmark and goes there again once Postmark answers."""
    failover_workers.before_answer = lambda message_id, record: time.sleep(CALL_DEADLINE + 3)
    code = delivered(notify(api, "security.login_code", LOGIN))
    assert code.finished_at < code.deadline
    assert [p for p, _ in providers_of(code)] == ["postmark", "smtp"]
    assert smtp_copies(smtp, code) == 1

    promo = notify(api, "promo.weekly", PROMO)
    wait_for(
        lambda: DeliveryAttempt.objects.filter(delivery_id=promo.pk).exists(),
        timeout=20,
        what="the marketing email tried",
    )
    promo.refresh_from_db()
    assert promo.pinned_provider == "postmark"
    failover_workers.before_answer = None
    delivered(promo)
    assert smtp_copies(smtp, promo) == 0
    assert len(smtp.received) == 1  # the login code's, nothing else
    assert {p for p, _ in providers_of(promo)} == {"postmark"}
