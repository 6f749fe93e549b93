"""SMS failover between two SMSC binds (NOTIFY_SMS_PROVIDERS=smpp,smpp2) on real worker
processes: the first SMSC refuses our binds, so every SMS goes through the second,
once, each attempt row naming the bind that took it."""

from __future__ import annotations

import pytest

from deliveries.models import Delivery, DeliveryAttempt, DeliveryStatus
from deliveries.pipeline.routing import notification_route
from tests.deliveries.sms.conftest import PASSWORD, SYSTEM_ID
from tests.deliveries.sms.smsc import Smsc
from tests.waiting import wait_for


@pytest.fixture
def second_smsc():
    peer = Smsc(system_id=SYSTEM_ID, password=PASSWORD)
    peer.start()
    yield peer
    peer.stop()


def test_every_sms_goes_through_the_second_smsc_once_when_the_first_refuses_binds(
    smsc, second_smsc, login_code_for_worker, workers_with, settings
):
    workers_with(
        NOTIFY_CHANNELS_ENABLED=",".join(settings.NOTIFY_CHANNELS_ENABLED),
        NOTIFY_SMS_PROVIDERS="smpp,smpp2",
        SMPP_PASSWORD="not-the-password",  # the first SMSC refuses every bind
        SMPP2_HOST="127.0.0.1",
        SMPP2_PORT=str(second_smsc.port),
        SMPP2_SYSTEM_ID=SYSTEM_ID,
        SMPP2_PASSWORD=PASSWORD,
        SMPP_BIND_WAIT="1",
    )
    codes = [f"{n:06d}" for n in range(5)]
    deliveries = []
    for code in codes:
        notification = login_code_for_worker(code)
        notification_route(notification_id=str(notification.pk))
        deliveries.append(Delivery.objects.get(notification=notification, channel="sms"))

    def all_delivered():
        done = Delivery.objects.filter(
            pk__in=[d.pk for d in deliveries],
            status__in=[DeliveryStatus.DELIVERED, DeliveryStatus.REACHED],
        ).count()
        return done == len(deliveries)

    wait_for(all_delivered, timeout=60, what="every SMS delivered")
    texts = sorted(submit.short_message for submit in second_smsc.accepted())
    assert len(texts) == len(codes), texts  # each once
    assert smsc.accepted() == []
    assert smsc.refused_binds > 0
    providers = set(
        DeliveryAttempt.objects.filter(delivery__in=deliveries).values_list("provider", flat=True)
    )
    assert "smpp2" in providers and providers <= {"smpp", "smpp2"}
