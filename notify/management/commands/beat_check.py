"""`manage.py beat_check`: a health check of the periodic jobs — exits 1 naming each job
beat has not sent for NOTIFY_BEAT_OVERDUE_FACTOR of its intervals (overdue) or no worker
has finished for NOTIFY_BEAT_STALLED_FACTOR of them (stalled), 0 when none."""

from django.core.management.base import BaseCommand, CommandError

from notify.ops.beat import beat_jobs


def _age(seconds: float | None) -> str:
    return "never sent" if seconds is None else f"last sent {seconds:.0f} s ago"


def _finished(seconds: float | None) -> str:
    return "never finished" if seconds is None else f"last finished {seconds:.0f} s ago"


class Command(BaseCommand):
    help = (
        "Exit 1 (naming them) when periodic jobs are overdue (beat has not sent them for "
        "NOTIFY_BEAT_OVERDUE_FACTOR intervals) or stalled (no worker finished them for "
        "NOTIFY_BEAT_STALLED_FACTOR intervals: the workers of their queue are down or far "
        "behind). For a process manager's health check and for alerting."
    )

    def handle(self, *args, **options) -> None:
        try:
            jobs = beat_jobs()
        except Exception as error:  # Redis away: beat cannot schedule either
            raise CommandError(f"beat: cannot read the marks in Redis: {error}") from error
        problems = []
        overdue = [job for job in jobs if job.overdue]
        if overdue:
            lines = [f"{job.name} ({_age(job.age)}, every {job.interval:g} s)" for job in overdue]
            problems.append("overdue: " + "; ".join(lines))
        stalled = [job for job in jobs if job.stalled]
        if stalled:
            lines = [
                f"{job.name} ({_finished(job.finished_age)}, every {job.interval:g} s)"
                for job in stalled
            ]
            problems.append("not run by any worker: " + "; ".join(lines))
        if problems:
            raise CommandError("beat: " + " | ".join(problems))
        self.stdout.write(f"beat: ok ({len(jobs)} jobs on time)")
