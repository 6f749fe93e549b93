"""The Celery application (`celery -A notify`). Configuration lives in settings (CELERY_*)."""

import os

from celery import Celery
from celery.signals import celeryd_after_setup

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "notify.settings")

app = Celery("notify")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@celeryd_after_setup.connect
def _declare_broker_topology(sender, instance, **kwargs) -> None:
    # Broker set-up, not business logic: make sure dead letters have somewhere to go
    # before the first message is dead-lettered, even on a broker that never saw us.
    with app.connection_for_write() as conn:
        for queue in app.conf.task_queues:
            queue.bind(conn.default_channel).declare()
