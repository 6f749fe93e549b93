"""The Celery application (`celery -A config`) and its process hooks. Configuration,
the beat schedule included, lives in settings (CELERY_*, config/settings/beat.py).

The apps reach this application as Celery's current app (`shared_task`,
`celery.current_app`), so none of them imports the project that wires them.
"""

import logging
import os
from collections.abc import Callable

from celery import Celery, platforms
from celery.signals import (
    beat_init,
    celeryd_after_setup,
    task_postrun,
    task_prerun,
    task_success,
    worker_init,
    worker_ready,
    worker_shutting_down,
)
from django_redis import get_redis_connection
from redbeat import RedBeatScheduler
from redbeat.schedulers import get_redis

from flow.campaign_statements import campaign_statements_free, campaign_statements_limited
from flow.priority import high_work_mark, low_work_done, low_work_yield
from notify.broker import NotifyTask, declare_topology, delivered_queue
from notify.checks import process_exit_on_weak_secret_key
from notify.ops.beat import (
    beat_job_finished_mark,
    beat_job_mark,
    beat_job_of_task,
    beat_started_mark,
)
from notify.ops.heap import startup_heap_freeze

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

logger = logging.getLogger(__name__)


app = Celery("notify", task_cls=NotifyTask)
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
# Celery's current app is per thread (the one that created it); as the default it is also
# every other thread's (a relay's, a web server's), so publishing never falls back to an
# unconfigured app there.
app.set_default()


class LeaderBeatScheduler(RedBeatScheduler):
    """celery-redbeat's scheduler: of several beat processes, only the holder of its Redis
    lock schedules; the others wait in `beat_init` until the lock is free.

    Redbeat renews the lock once per tick. This one also renews it right before every
    publish, so a leader that stalled (a hung broker, a paused process) past the lock's
    life finds it gone — LockNotOwnedError ends the process — instead of publishing
    beside the beat that took over. NOTIFY_BEAT_LOCK_TIMEOUT is longer than one publish
    may take, so a publish begun under the lock ends under it.
    """

    def __init__(self, *args, **kwargs) -> None:
        # Before the lock: a beat that must not run should not wait for it first.
        process_exit_on_weak_secret_key(process="celery beat")
        super().__init__(*args, **kwargs)
        self._start_marked = False

    def maybe_due(self, entry, **kwargs):
        if self.lock is not None and entry.is_due()[0]:
            self.lock.extend(self.lock_timeout)
        return super().maybe_due(entry, **kwargs)

    def tick(self, *args, **kwargs):
        if not self._start_marked:
            # Once, as the leader (only it ticks): jobs not sent yet are timed from here.
            beat_started_mark(get_redis(self.app))
            self._start_marked = True
        return super().tick(*args, **kwargs)

    def apply_async(self, entry, producer=None, advance=True, **kwargs):
        _beat_stop.publishing = True
        try:
            result = super().apply_async(entry, producer, advance, **kwargs)
        finally:
            _beat_stop.publishing = False
        # Only after the publish returned (confirmed): the mark means the job was sent.
        try:
            beat_job_mark(get_redis(self.app), job=entry.name)
        except Exception:  # the job went out; a lost mark must not read as a failed send
            logger.warning("beat: could not mark %s as sent", entry.name, exc_info=True)
        if _beat_stop.asked:
            raise SystemExit()  # a stop that came during the publish: now it is safe
        return result


class _BeatStop:
    """Whether beat is publishing now, and whether a stop came meanwhile."""

    publishing = False
    asked = False


_beat_stop = _BeatStop()


def beat_stop_handler(service) -> Callable[[int, object], None]:
    """Beat's SIGTERM/SIGINT handler. Celery's own saves the schedule and closes the
    broker connection from inside the handler; when the signal lands while a publish is
    writing its frame, that close blocks on the half-written connection and beat never
    exits (seen). So during a publish the stop waits for the publish to end (the
    scheduler then exits, saving as Celery does); at any other moment it is Celery's."""

    def stop(signum: int, frame: object) -> None:
        if _beat_stop.publishing:
            _beat_stop.asked = True
            return
        service.sync()
        raise SystemExit()

    return stop


@celeryd_after_setup.connect
def _declare_broker_topology(sender, instance, **kwargs) -> None:
    # Broker set-up, not business logic: make sure dead letters have somewhere to go
    # before the first message is dead-lettered, even on a broker that never saw us.
    declare_topology()


@worker_shutting_down.connect
def _hand_back_waiting_sends(sender=None, **kwargs) -> None:
    # Sends waiting in this worker for their channel's sender were acknowledged: they go
    # back to the broker now rather than depend on the process living to serve them.
    from flow.senders import channel_lines_close

    channel_lines_close()


@worker_init.connect
def _refuse_weak_secret_key_in_worker(sender=None, **kwargs) -> None:
    # Workers seal deliveries at routing and check the seals before sending.
    process_exit_on_weak_secret_key(process="celery worker")


@worker_ready.connect
def _worker_heap_freeze(sender=None, **kwargs) -> None:
    # Ready: the tasks, the apps and the connections' code are loaded for good.
    startup_heap_freeze()


@worker_ready.connect
def _line_leases_start(sender=None, **kwargs) -> None:
    # Every worker keeps its channel lines' lease alive and publishes again what a lost
    # worker's lines held: one Redis round trip a second.
    from flow.line_lease import line_leases_start

    line_leases_start()


@beat_init.connect
def _refuse_weak_secret_key_in_beat(sender=None, **kwargs) -> None:
    process_exit_on_weak_secret_key(process="celery beat")


@beat_init.connect
def _beat_stops_between_publishes(sender=None, **kwargs) -> None:
    # Sent by the beat service as it starts, after Celery installed its own handler.
    platforms.signals.update(SIGTERM=beat_stop_handler(sender), SIGINT=beat_stop_handler(sender))


@task_prerun.connect
def _campaign_work_yields_to_high(sender=None, task=None, **kwargs) -> None:
    # Which queue the message came from decides: a worker may serve several.
    queue = delivered_queue(getattr(task.request, "delivery_info", None))
    if queue == "high":
        high_work_mark()
    elif queue == "low":
        campaign_statements_limited()
        low_work_yield()


@task_postrun.connect
def _campaign_turn_back(sender=None, task=None, **kwargs) -> None:
    low_work_done()  # a no-op unless this thread's low task took a turn
    campaign_statements_free()


@task_success.connect
def _periodic_job_finished(sender=None, **kwargs) -> None:
    # Beat's marks say a job was sent; this one says a worker ran it to the end, so a
    # sweep whose workers are dead is seen to stop (notify/ops/beat.py). One SET.
    job = beat_job_of_task(getattr(sender, "name", ""))
    if job is None:
        return
    try:
        beat_job_finished_mark(get_redis_connection("default"), job=job)
    except Exception:  # the run's work is done; a lost mark must not fail it
        logger.warning("could not mark %s as finished", job, exc_info=True)
