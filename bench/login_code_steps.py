"""S3's breakdown of a login code's time: per step, its slowest codes, and (with
BENCH_S3_WAITS=1) what its PostgreSQL backends were doing."""

from __future__ import annotations

import statistics
from collections import Counter
from typing import TYPE_CHECKING

from bench.pg_waits import waits_text
from bench.report import percentile

if TYPE_CHECKING:  # bench.login_codes imports this module
    from bench.login_codes import Codes

STAGES = ("relay", "route", "queue", "send")
# Not steps but what the queue step may hold: time held back behind an earlier delivery
# to the same person (per-recipient order), and the message's wait from its last publish.
DETAILS = ("held", "published->claimed")
STEPS = STAGES + DETAILS


def _step_ms(runs: list[Codes], stage: str, q: float) -> float:
    """Each run's quantile `q` of a step, median over the runs, in ms."""
    return statistics.median(percentile(c.stages[stage], q) for c in runs) * 1000


def steps_print(busy: list[Codes], idle: list[Codes]) -> None:
    """Each step's median and p99 during the campaign and idle, and where the three
    slowest codes of each spent their time."""
    # Each run's median and p99 of a step, median over the runs (the steps' p99s
    # need not come from the same codes, so they do not add up).
    for name, q in (("median", 0.5), ("p99", 0.99)):
        parts = (f"{s} {_step_ms(busy, s, q):.0f} ms ({_step_ms(idle, s, q):.0f})" for s in STEPS)
        print(f"S3 {name} per step during the campaign (idle): " + ", ".join(parts))
    # The p99 is one or two codes: show where the slowest ones spent their time.
    for label, runs in (("during the campaign", busy), ("idle", idle)):
        slowest = sorted(
            (
                sum(c.stages[s][i] for s in STAGES),
                [c.stages[s][i] for s in STAGES + DETAILS],
                c.stages["at"][i],
            )
            for c in runs
            for i in range(len(c.stages["relay"]))
        )[-3:]
        print(
            f"S3 slowest codes {label} (ms; "
            + ", ".join(STAGES + DETAILS)
            + "; s after the run's first code): "
            + "; ".join(
                f"{total * 1000:.0f} = "
                + "/".join(f"{v * 1000:.0f}" for v in steps)
                + f" at {at:.1f} s"
                for total, steps, at in reversed(slowest)
            )
        )


def waits_print(busy: list[Codes], idle: list[Codes]) -> None:
    """What the login codes' backends were doing while they ran statements (sampled)."""
    for label, runs in (("during the campaign", busy), ("idle", idle)):
        counts: Counter[str] = Counter()
        for c in runs:
            counts.update(c.waits or {})
        print(
            f"S3 the login codes' PostgreSQL backends (intake, high worker and relay) while "
            f"running a statement, {label}: {waits_text(counts)}"
        )
