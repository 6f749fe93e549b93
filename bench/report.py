"""How the bench reports: the machine line, progress on stderr, ratios and verdicts.

Results go to stdout; progress (`phase`) goes to stderr, so the results read alone.
"""

from __future__ import annotations

import contextlib
import math
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable, Iterator

from bench.wrk import LoadResult


def machine_line() -> str:
    """nproc, CPU model, kernel and Python: printed first, so numbers have their context."""
    model = platform.processor() or "unknown CPU"
    with contextlib.suppress(OSError), open("/proc/cpuinfo", encoding="utf-8") as cpuinfo:
        for line in cpuinfo:
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    load = ", ".join(f"{value:.2f}" for value in os.getloadavg())
    return (
        f"machine: {os.cpu_count()} CPUs ({model}), Linux {platform.release()}, "
        f"Python {platform.python_version()}; load average {load}"
    )


@contextlib.contextmanager
def phase(title: str) -> Iterator[None]:
    """Prints what is being measured and how long it took, on stderr (not the results)."""
    started = time.perf_counter()
    print(f"bench: {title} ...", file=sys.stderr, flush=True)
    yield
    print(
        f"bench: {title}: done in {time.perf_counter() - started:.0f} s",
        file=sys.stderr,
        flush=True,
    )


def ratio(subject: float, baseline: float) -> float:
    """subject / baseline; NaN rather than a crash when the baseline measured nothing."""
    return subject / baseline if baseline else float("nan")


def verdict(value: float, target: float, *, at_least: bool, unit: str = "x") -> str:
    """'target ≥ 0.6x: met' (or ≤, or 'NOT met'), for the end of a result line; `unit`
    follows the target ('' for a count)."""
    ok = value >= target if at_least else value <= target
    sign = "≥" if at_least else "≤"
    return f"target {sign} {target:g}{unit}: {'met' if ok else 'NOT met'}"


def median_of(results: list[LoadResult], field: Callable[[LoadResult], float]) -> float:
    """The median of one figure (req/s, p99, ...) over several wrk runs."""
    return statistics.median(field(result) for result in results)


def report_unexpected(name: str, results: list[LoadResult], status: int) -> None:
    """Print a warning when any request got no answer or another status than `status`."""
    bad = sum(r.unexpected + r.socket_errors for r in results)
    if bad:
        total = sum(r.requests for r in results)
        print(f"{name}: WARNING {bad} of {total} requests did not answer {status}")


def twin_runs(runs: int, *, twins: bool) -> int:
    """How many runs a scenario with analytics twins makes of `runs`: an even number, so
    that each twin goes first in as many runs as the other (an odd count gave one of
    them the first place once more, and the drain after the baseline ran faster or
    slower with the machine's phase)."""
    return runs + runs % 2 if twins else runs


def percentile(values: list[float], fraction: float) -> float:
    """Nearest rank: of 200 values (the default) the 99th percentile is the second
    slowest; of fewer than 100 it is the slowest one, a figure that one hiccup of a
    shared machine decides."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(fraction * len(ordered)) - 1)]
