"""Analytics fixtures: the store in the test's own process, or a real `analytics`
process (the Procfile's command) with a store of its own, read through its reader."""

from __future__ import annotations

import pytest

from scripts.ports import unused_port
from tests.campaigns.conftest import promo_data  # noqa: F401 - a fixture, by name
from tests.deliveries.ops.test_delivery_latency import ann  # noqa: F401 - likewise
from tests.deliveries.pipeline.test_costs import fcm_peer, quiet_broker  # noqa: F401 - likewise
from tests.flow.test_priority import fresh  # noqa: F401 - likewise
from tests.preferences.conftest import mail  # noqa: F401 - likewise
from tests.processes import ScriptProcess


@pytest.fixture
def analytics_on(settings):
    settings.NOTIFY_ANALYTICS_ENABLED = True


@pytest.fixture
def store(settings, analytics_on):
    """The embedded store, opened in this process (its own data directory), emptied."""
    from analytics.store.backend import store_open, stores_forget
    from analytics.store.schema import schema_ensure, store_truncate

    settings.NOTIFY_ANALYTICS_READER_ADDRESS = ""
    stores_forget()
    opened = store_open(owner=True)
    schema_ensure(opened)
    store_truncate(opened)
    return opened


class AnalyticsProcess(ScriptProcess):
    """`scripts/analytics.sh` (the Procfile's shipper), its data directory and reader
    address."""

    def __init__(self, env: dict[str, str], *, data_dir: str) -> None:
        self.address = f"127.0.0.1:{unused_port()}"
        env = {
            **env,
            "NOTIFY_ANALYTICS_ENABLED": "true",
            "NOTIFY_ANALYTICS_DATA_DIR": data_dir,
            "NOTIFY_ANALYTICS_READER_ADDRESS": self.address,
            "NOTIFY_ANALYTICS_POLL_INTERVAL": "0.2",
        }
        super().__init__("analytics.sh", env=env, name="analytics")

    def start(self) -> None:
        super().start()
        self.wait_logged("analytics: shipping", timeout=60)


@pytest.fixture
def analytics_process(worker_env, tmp_path, settings, analytics_on):
    """A running `analytics` process; this process's reads go to its reader."""
    from analytics.store.backend import stores_forget

    process = AnalyticsProcess(worker_env, data_dir=str(tmp_path / "store"))
    process.start()
    settings.NOTIFY_ANALYTICS_READER_ADDRESS = process.address
    stores_forget()
    yield process
    process.stop()
    stores_forget()


def store_rows(sql: str, params: dict | None = None) -> list[tuple]:
    """A query of the store, the way this process reaches it."""
    from analytics.store.backend import store_open

    return store_open().query(sql, params)


def queue_events(count: int, **fields) -> list:
    """`count` events waiting in PostgreSQL, as the pipeline's writes leave them."""
    import uuid

    from django.utils import timezone

    from analytics.models import AnalyticsEvent

    defaults = {
        "kind": "delivered",
        "occurred_at": timezone.now(),
        "producer_id": 1,
        "campaign_id": None,
        "category": "promo.weekly",
        "channel": "email",
        "provider": "smtp",
        "reason": "",
        "delivery_id": 1,
        "notification_id": uuid.uuid4(),
        "person": "0" * 32,
        "latency_ms": 100,
        # Given, not left to the columns' database default: Django then inserts the
        # batch as arrays (one parameter per column, not per value).
        "pair_channel": "",
        "pair_provider": "",
    }
    return AnalyticsEvent.objects.bulk_create(
        [AnalyticsEvent(**{**defaults, **fields}) for _ in range(count)]
    )
