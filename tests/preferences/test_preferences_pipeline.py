"""The gate on the real pipeline: API → RabbitMQ → a real worker → feed and SMTP."""

from __future__ import annotations

from urllib.parse import urlsplit

import pytest

from preferences.models import ConsentRecord
from tests.preferences.conftest import (
    LOGIN,
    PROMO,
    post_event,
    register,
    signup_consent,
)
from tests.statuses import settled
from tests.waiting import wait_for

pytestmark = pytest.mark.e2e


def test_email_opt_out_keeps_promo_in_app_and_login_codes_cannot_be_turned_off(api, pipeline):
    smtp = pipeline
    register(api, "u-opt")
    signup_consent(api, "u-opt")

    response = api.put(
        "/v1/users/u-opt/preferences",
        {"categories": {"promo.weekly": {"email": False}}},
        format="json",
    )
    assert response.status_code == 200
    assert response.json()["categories"]["promo.weekly"] == {
        "inapp": True,
        "email": False,
        "webpush": False,
    }

    promo = post_event(api, user_id="u-opt", category="promo.weekly", payload=PROMO)
    found = wait_for(settled(api, promo, {"inapp", "email"}), what="promo settled")
    assert (found["inapp"]["status"], found["inapp"]["reason"]) == ("delivered", "")
    assert (found["email"]["status"], found["email"]["reason"]) == ("suppressed", "opted_out")

    refused = api.put(
        "/v1/users/u-opt/preferences",
        {"categories": {"security.login_code": {"email": False}}},
        format="json",
    )
    assert refused.status_code == 409
    assert refused.json()["error"]["code"] == "mandatory_category"
    document = api.get("/v1/users/u-opt/preferences").json()
    assert document["categories"]["security.login_code"]["email"] is True
    assert "security.login_code" in document["mandatory"]

    code = post_event(api, user_id="u-opt", category="security.login_code", payload=LOGIN)
    found = wait_for(settled(api, code, {"email"}), what="login code settled")
    assert found["email"]["status"] == "delivered"
    mail = wait_for(lambda: smtp.received, what="the login code email")
    assert [m.rcpt_tos for m in mail] == [["u-opt@example.com"]]
    assert mail[0].message["List-Unsubscribe"] is None  # not marketing


def test_marketing_without_consent_is_suppressed_with_no_consent(api, pipeline):
    register(api, "u-noconsent")
    promo = post_event(api, user_id="u-noconsent", category="promo.weekly", payload=PROMO)
    found = wait_for(settled(api, promo, {"inapp", "email"}), what="promo settled")
    assert (found["inapp"]["status"], found["inapp"]["reason"]) == ("suppressed", "no_consent")
    assert (found["email"]["status"], found["email"]["reason"]) == ("suppressed", "no_consent")
    assert pipeline.received == []


def test_one_click_unsubscribe_from_the_received_email(api, pipeline, anon_client):
    smtp = pipeline
    register(api, "u-unsub")
    signup_consent(api, "u-unsub")
    promo = post_event(api, user_id="u-unsub", category="promo.weekly", payload=PROMO)
    wait_for(settled(api, promo, {"inapp", "email"}), what="promo settled")
    mail = wait_for(lambda: smtp.received, what="the promo email")[0]

    header = str(mail.message["List-Unsubscribe"]).strip()  # long: folded onto a new line
    assert header.startswith("<") and header.endswith(">")
    link = header[1:-1]
    assert str(mail.message["List-Unsubscribe-Post"]) == "List-Unsubscribe=One-Click"
    assert link in mail.part("text/plain")
    assert link in mail.part("text/html")
    path = urlsplit(link).path
    records = ConsentRecord.objects.filter(recipient__user_id="u-unsub")
    before = records.count()

    page = anon_client.get(path)  # what a mail scanner does
    assert page.status_code == 200 and b"<form" in page.content
    assert records.count() == before

    tampered = anon_client.post(path[:-3] + ("AAA" if not path.endswith("AAA") else "BBB"))
    assert tampered.status_code == 400
    assert records.count() == before

    done = anon_client.post(path)
    assert done.status_code == 200  # no redirect, no login
    assert records.count() == before + 1
    latest = records.order_by("-id").first()
    assert (latest.granted, latest.source, latest.channel) == (False, "email_link", "")

    again = anon_client.post(path)  # replay: same answer, no second record
    assert again.status_code == 200
    assert records.count() == before + 1

    cells = api.get("/v1/users/u-unsub/preferences").json()["categories"]["promo.weekly"]
    assert not any(cells.values())

    smtp.handler.reset()
    promo = post_event(api, user_id="u-unsub", category="promo.weekly", payload=PROMO)
    found = wait_for(settled(api, promo, {"inapp", "email"}), what="second promo settled")
    assert (found["inapp"]["status"], found["inapp"]["reason"]) == ("suppressed", "unsubscribed")
    assert (found["email"]["status"], found["email"]["reason"]) == ("suppressed", "unsubscribed")
