"""Beat's liveness: how long ago beat sent each periodic job and a worker last finished
it, on /metrics, in admin and as a check a process manager runs (`manage.py beat_check`)."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest
from django.conf import settings
from django.contrib.auth.models import User
from django.core.management import CommandError, call_command
from django_redis import get_redis_connection

from notify.ops.beat import (
    STARTED,
    beat_job_finished_key,
    beat_job_finished_mark,
    beat_job_mark,
    beat_last_run_key,
    beat_started_mark,
)
from tests.processes import ARTIFACTS, ROOT, WorkerProcess, stop_children
from tests.waiting import wait_for

JOBS = settings.CELERY_BEAT_SCHEDULE
STALE_JOB = "retry-sweep"


def interval(job: str) -> float:
    return float(JOBS[job]["schedule"])


def _marks_clear(redis) -> None:
    redis.delete(beat_last_run_key(), *[beat_job_finished_key(job) for job in JOBS])


@pytest.fixture
def marks():
    """Beat's marks (sent) and the workers' (finished), set by the test directly in (the
    test run's own) Redis; `unfinished` ages only the finished marks."""
    redis = get_redis_connection("default")
    _marks_clear(redis)

    def set_all(
        *, stale: dict[str, float] | None = None, unfinished: dict[str, float] | None = None
    ) -> None:
        now = time.time()
        for job in JOBS:
            beat_job_mark(redis, job=job, at=now - (stale or {}).get(job, 0.0))
            beat_job_finished_mark(redis, job=job, at=now - (unfinished or {}).get(job, 0.0))

    yield set_all
    _marks_clear(redis)


def beat_check(env: dict[str, str]) -> subprocess.CompletedProcess:
    """`manage.py beat_check` as a process manager runs it, in this run's places."""
    return subprocess.run(
        [sys.executable, "manage.py", "beat_check"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_an_old_mark_shows_its_age_on_metrics_and_fails_the_check_naming_the_job(
    db, broker, marks, scrape, worker_env
):
    age = interval(STALE_JOB) * settings.NOTIFY_BEAT_OVERDUE_FACTOR + 60
    marks(stale={STALE_JOB: age})

    metrics = scrape()
    shown = metrics.value("notify_beat_job_last_run_age_seconds", job=STALE_JOB)
    assert age <= shown < age + 30
    assert metrics.value("notify_beat_job_overdue", job=STALE_JOB) == 1
    assert metrics.value("notify_beat_job_overdue", job="route-sweep") == 0
    assert metrics.value("notify_metrics_source_up", source="beat") == 1

    checked = beat_check(worker_env)
    assert checked.returncode == 1
    assert f"overdue: {STALE_JOB} (last sent" in checked.stderr
    assert "route-sweep" not in checked.stderr


def test_with_fresh_marks_the_check_passes(db, broker, marks, scrape, worker_env):
    marks()

    metrics = scrape()
    for job in JOBS:
        assert metrics.value("notify_beat_job_last_run_age_seconds", job=job) < 30
        assert metrics.value("notify_beat_job_overdue", job=job) == 0
    checked = beat_check(worker_env)
    assert checked.returncode == 0, checked.stderr
    assert f"beat: ok ({len(JOBS)} jobs on time)" in checked.stdout


def test_a_job_not_sent_since_beat_started_is_overdue_after_three_intervals(db, marks):
    redis = get_redis_connection("default")
    marks()
    redis.hdel(beat_last_run_key(), "history-retention")
    # A beat that started a minute ago has not had an interval to send it: on time.
    beat_started_mark(redis, at=time.time() - 60)
    call_command("beat_check")

    hours = interval("history-retention") * settings.NOTIFY_BEAT_OVERDUE_FACTOR + 60
    beat_started_mark(redis, at=time.time() - hours)
    with pytest.raises(CommandError, match=r"overdue: history-retention \(never sent"):
        call_command("beat_check")


def test_without_any_beat_ever_started_every_job_is_overdue(db, marks):
    with pytest.raises(CommandError) as failed:
        call_command("beat_check")
    assert all(job in str(failed.value) for job in JOBS)


def test_admin_shows_each_job_and_which_is_overdue(client, db, marks):
    client.force_login(User.objects.create_superuser("ops", "ops@example.com", "pw"))
    marks(stale={STALE_JOB: interval(STALE_JOB) * settings.NOTIFY_BEAT_OVERDUE_FACTOR + 60})

    page = client.get("/admin/deliveries/delivery/").content.decode()

    assert f'<strong id="beat-overdue">overdue: {STALE_JOB}</strong>' in page
    assert page.count('class="beat-job"') == len(JOBS)

    marks()
    page = client.get("/admin/deliveries/delivery/").content.decode()
    assert "all on time" in page
    assert "beat-overdue" not in page


def test_a_running_beat_marks_each_job_it_sends(worker_env, broker, marks):
    from tests.conftest import purge_queues

    redis = get_redis_connection("default")
    redis.delete(beat_last_run_key())
    started = time.time()
    ARTIFACTS.mkdir(exist_ok=True)
    log = open(ARTIFACTS / "beat-liveness.log", "ab")  # noqa: SIM115 - the child's for its life
    process = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "config", "beat", "-l", "INFO"],
        cwd=ROOT,
        env=worker_env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    # A new schedule sends each job one interval after beat starts: the quick ones here.
    quick = {job for job in JOBS if interval(job) <= 10}
    assert quick
    try:
        wait_for(
            lambda: quick | {STARTED} <= {k.decode() for k in redis.hkeys(beat_last_run_key())},
            timeout=60,
            what=f"beat to mark {sorted(quick)}",
        )
    finally:
        process.terminate()
        process.wait(timeout=30)
        purge_queues(broker)
    sent = {k.decode(): float(v) for k, v in redis.hgetall(beat_last_run_key()).items()}
    assert all(started <= sent[job] <= time.time() for job in quick | {STARTED})
    # The slow jobs are timed from beat's start: on time.
    from notify.ops.beat import beat_jobs

    assert not [job.name for job in beat_jobs() if job.overdue]


def test_a_stop_that_lands_during_a_publish_waits_for_the_publish_to_end():
    """Celery's own handler closed the broker connection inside the signal handler, and
    a SIGTERM landing mid-publish left beat blocked on the half-written connection for
    good. Mid-publish the stop is only noted; at any other moment beat stops at once."""
    import signal as signals

    import pytest

    from config.celery import _beat_stop, beat_stop_handler

    class Service:
        synced = 0

        def sync(self) -> None:
            self.synced += 1

    service = Service()
    stop = beat_stop_handler(service)
    try:
        _beat_stop.publishing = True
        stop(signals.SIGTERM, None)  # returns: the publish goes on
        assert _beat_stop.asked and service.synced == 0
        _beat_stop.publishing, _beat_stop.asked = False, False
        with pytest.raises(SystemExit):
            stop(signals.SIGTERM, None)
        assert service.synced == 1
    finally:
        _beat_stop.publishing, _beat_stop.asked = False, False


def test_a_sent_job_that_no_worker_finishes_is_stalled_and_fails_the_check(db, marks, scrape):
    interval_seconds = interval(STALE_JOB)
    unfinished = interval_seconds * settings.NOTIFY_BEAT_STALLED_FACTOR + 60
    marks(unfinished={STALE_JOB: unfinished})  # beat sends it on time; nobody runs it

    metrics = scrape()
    shown = metrics.value("notify_beat_job_last_finished_age_seconds", job=STALE_JOB)
    assert unfinished <= shown < unfinished + 30
    assert metrics.value("notify_beat_job_overdue", job=STALE_JOB) == 0
    assert metrics.value("notify_beat_job_stalled", job=STALE_JOB) == 1
    assert metrics.value("notify_beat_job_stalled", job="route-sweep") == 0
    with pytest.raises(CommandError, match=rf"not run by any worker: {STALE_JOB} \(last finished"):
        call_command("beat_check")


# The sweep the next test times, sent by beat every QUICK seconds.
QUICK = 1.0


def _finished_age(scrape) -> float | None:
    return scrape().value("notify_beat_job_last_finished_age_seconds", job=STALE_JOB)


def test_with_the_workers_stopped_the_age_since_a_sweep_last_ran_grows_and_drops_once_back(
    db, broker, worker_env, scrape, settings, session_worker_paused
):
    """Real beat and worker processes, the retry sweep every second: with the workers
    stopped, beat keeps sending (its marks stay fresh) but the sweep's age since it last
    finished grows past two intervals, /metrics and beat_check say so; with a worker back
    it drops."""
    from tests.conftest import purge_queues

    env = {**worker_env, "NOTIFY_RETRY_SWEEP_INTERVAL": f"{QUICK:g}"}
    settings.CELERY_BEAT_SCHEDULE = {
        **JOBS,
        STALE_JOB: {**JOBS[STALE_JOB], "schedule": QUICK},
    }
    redis = get_redis_connection("default")
    _marks_clear(redis)
    purge_queues(broker)
    ARTIFACTS.mkdir(exist_ok=True)
    log = open(ARTIFACTS / "beat-liveness.log", "ab")  # noqa: SIM115 - the child's for its life
    beat = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "config", "beat", "-l", "INFO"],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    worker = WorkerProcess(env, name="beat-liveness", queues="high,low")
    try:
        worker.start()
        wait_for(
            lambda: (age := _finished_age(scrape)) is not None and age < 2 * QUICK,
            timeout=60,
            what="the retry sweep run by the worker",
        )
        worker.stop()
        stopped = time.monotonic()
        wait_for(
            lambda: (_finished_age(scrape) or 0) > 2 * QUICK + 1,
            timeout=30,
            what="the age since the sweep last ran to pass two intervals",
        )
        metrics = scrape()
        assert metrics.value("notify_beat_job_stalled", job=STALE_JOB) == 1
        # Beat itself is fine: it goes on sending the sweep.
        assert metrics.value("notify_beat_job_last_run_age_seconds", job=STALE_JOB) < 2 * QUICK
        assert metrics.value("notify_beat_job_overdue", job=STALE_JOB) == 0
        checked = beat_check(env)
        assert checked.returncode == 1
        assert f"not run by any worker: {STALE_JOB} (last finished" in checked.stderr
        assert time.monotonic() - stopped < 30

        worker.start()
        wait_for(
            lambda: (age := _finished_age(scrape)) is not None and age < 2 * QUICK,
            timeout=60,
            what="the age to drop once a worker runs the sweep again",
        )
        assert scrape().value("notify_beat_job_stalled", job=STALE_JOB) == 0
    finally:
        stop_children([beat, worker.process])
        purge_queues(broker)
        _marks_clear(redis)
