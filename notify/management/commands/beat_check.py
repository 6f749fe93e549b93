"""`manage.py beat_check`: a health check for beat's host — exits 1 naming each periodic
job beat has not sent for NOTIFY_BEAT_OVERDUE_FACTOR of its intervals, 0 when none."""

from django.core.management.base import BaseCommand, CommandError

from notify.ops.beat import beat_jobs


def _age(seconds: float | None) -> str:
    return "never sent" if seconds is None else f"last sent {seconds:.0f} s ago"


class Command(BaseCommand):
    help = (
        "Exit 1 (naming them) when periodic jobs are overdue: beat has not sent them for "
        "NOTIFY_BEAT_OVERDUE_FACTOR intervals. For a process manager's health check."
    )

    def handle(self, *args, **options) -> None:
        try:
            jobs = beat_jobs()
        except Exception as error:  # Redis away: beat cannot schedule either
            raise CommandError(f"beat: cannot read the marks in Redis: {error}") from error
        overdue = [job for job in jobs if job.overdue]
        if overdue:
            lines = [f"{job.name} ({_age(job.age)}, every {job.interval:g} s)" for job in overdue]
            raise CommandError("beat: overdue: " + "; ".join(lines))
        self.stdout.write(f"beat: ok ({len(jobs)} jobs on time)")
