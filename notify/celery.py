"""The Celery application (`celery -A notify`). Configuration lives in settings (CELERY_*)."""

import os

from celery import Celery
from celery.signals import (
    beat_init,
    celeryd_after_setup,
    task_postrun,
    task_prerun,
    worker_init,
)

from notify.checks import process_exit_on_weak_secret_key
from notify.priority import high_work_mark, low_work_done, low_work_yield

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


@worker_init.connect
def _refuse_weak_secret_key_in_worker(sender=None, **kwargs) -> None:
    # Workers seal deliveries at routing and check the seals before sending.
    process_exit_on_weak_secret_key(process="celery worker")


@beat_init.connect
def _refuse_weak_secret_key_in_beat(sender=None, **kwargs) -> None:
    process_exit_on_weak_secret_key(process="celery beat")


@task_prerun.connect
def _campaign_work_yields_to_high(sender=None, task=None, **kwargs) -> None:
    # Which queue the message came from decides: a worker may serve several.
    queue = (getattr(task.request, "delivery_info", None) or {}).get("routing_key")
    if queue == "high":
        high_work_mark()
    elif queue == "low":
        low_work_yield()


@task_postrun.connect
def _campaign_turn_back(sender=None, task=None, **kwargs) -> None:
    low_work_done()  # a no-op unless this thread's low task took a turn
