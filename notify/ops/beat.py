"""Beat's liveness: when beat last sent each periodic job, when a worker last finished
it, and which jobs are overdue (not sent) or stalled (sent, but not run).

Beat marks a job right after its message was published (confirmed by the broker), in
one Redis hash beside redbeat's own keys. Redbeat's `last_run_at` is not used: it is
advanced before the publish, so a publish that fails would still look like a run. If
beat stops (or keeps failing to publish), the marks age, and sweeps, releases, scheduled
sends, partitions and retention are seen to stop instead of stopping silently.

A sent job is not a run one: with the workers down beat keeps sending and its marks stay
fresh. So a worker also records when it finished each periodic job (one SET of the job's
own key, after the task returned: config/celery.py), and a job not finished for
NOTIFY_BEAT_STALLED_FACTOR intervals is stalled.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django_redis import get_redis_connection


def beat_last_run_key() -> str:
    """The Redis hash of job name → Unix time it was last sent; under redbeat's prefix (so
    deployments sharing a Redis keep apart) with its "::" for keys that are not entries."""
    return f"{settings.REDBEAT_KEY_PREFIX}:last-run"


# The field of the hash that holds when the scheduling beat started; not a job name.
STARTED = "::started"


def beat_job_finished_key(job: str) -> str:
    """The Redis key holding the Unix time a worker last finished `job` (one per job, so
    marking it is a single SET)."""
    return f"{settings.REDBEAT_KEY_PREFIX}:finished:{job}"


def beat_job_of_task(task_name: str) -> str | None:
    """The periodic job that runs `task_name` (None: no job of the schedule runs it)."""
    for job, entry in settings.CELERY_BEAT_SCHEDULE.items():
        if entry["task"] == task_name:
            return job
    return None


def beat_job_finished_mark(client, *, job: str, at: float | None = None) -> None:
    """Record that a worker has just finished `job` (`client`: a redis-py client)."""
    client.set(beat_job_finished_key(job), repr(time.time() if at is None else at))


def beat_job_mark(client, *, job: str, at: float | None = None) -> None:
    """Record that beat has just sent `job` (`client`: a redis-py client)."""
    client.hset(beat_last_run_key(), job, repr(time.time() if at is None else at))


def beat_started_mark(client, *, at: float | None = None) -> None:
    """Record that a beat has just begun scheduling: a job it has not sent yet (a new
    schedule first sends each job one interval after it starts) is measured from here."""
    beat_job_mark(client, job=STARTED, at=at)


def _interval_seconds(schedule: object) -> float | None:
    """A schedule entry's period in seconds; None for a calendar (crontab) schedule."""
    if isinstance(schedule, int | float):
        return float(schedule)
    if isinstance(schedule, timedelta):
        return schedule.total_seconds()
    run_every = getattr(schedule, "run_every", None)
    return run_every.total_seconds() if isinstance(run_every, timedelta) else None


@dataclass(frozen=True)
class BeatJob:
    """One periodic job as beat's marks see it."""

    name: str
    interval: float | None  # seconds; None: not a fixed period
    age: float | None  # seconds since beat last sent it; None: never sent
    started_age: float | None  # seconds since the scheduling beat started; None: never
    finished_age: float | None = None  # seconds since a worker last finished it; None: never

    @property
    def overdue(self) -> bool:
        """Not sent for NOTIFY_BEAT_OVERDUE_FACTOR intervals (a job never sent: counted
        from beat's start; with no beat ever started, overdue)."""
        if self.interval is None:
            return False
        waited = self.age if self.age is not None else self.started_age
        return waited is None or waited > self.interval * settings.NOTIFY_BEAT_OVERDUE_FACTOR

    @property
    def stalled(self) -> bool:
        """No worker finished it for NOTIFY_BEAT_STALLED_FACTOR intervals (never finished:
        counted from beat's start; with no beat ever started, stalled)."""
        if self.interval is None:
            return False
        waited = self.finished_age if self.finished_age is not None else self.started_age
        return waited is None or waited > self.interval * settings.NOTIFY_BEAT_STALLED_FACTOR


def beat_jobs(
    *, schedule: Mapping[str, dict] | None = None, now: float | None = None
) -> list[BeatJob]:
    """Every job of CELERY_BEAT_SCHEDULE with the age of its last send and of its last
    finished run, in schedule order.

    One round trip (HGETALL and MGET) to the Redis of REDIS_URL; raises when Redis does
    not answer.
    """
    schedule = settings.CELERY_BEAT_SCHEDULE if schedule is None else schedule
    now = time.time() if now is None else now
    pipe = get_redis_connection("default").pipeline(transaction=False)
    pipe.hgetall(beat_last_run_key())
    pipe.mget([beat_job_finished_key(name) for name in schedule] or ["-"])
    marks, finished = pipe.execute()
    ages = {_text(name): max(0.0, now - float(value)) for name, value in marks.items()}
    finished_ages = {
        name: max(0.0, now - float(value))
        for name, value in zip(schedule, finished, strict=False)
        if value is not None
    }
    return [
        BeatJob(
            name=name,
            interval=_interval_seconds(entry["schedule"]),
            age=ages.get(name),
            started_age=ages.get(STARTED),
            finished_age=finished_ages.get(name),
        )
        for name, entry in schedule.items()
    ]


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value
