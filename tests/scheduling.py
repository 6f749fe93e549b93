"""How the suite's tests are shared between test processes (pytest-xdist), and the
`alone` tests' turns.

Groups: a group runs whole in one test process. Each file is a group, and the cluster
folder is one (its 3-node cluster is package-scoped, started once). pytest-xdist's own
`loadgroup` reads `xdist_group` marks by rewriting node ids, which pytest 9 no longer
lets it do, so `--dist loadgroup` uses `SuiteScheduling` here instead.

The longest groups are handed out first, so that no minute-long file starts last and
runs on while the other processes stand idle: how long each took is in
tests/group_seconds.json (rewrite it after a run with `python scripts/test_durations.py
artifacts/junit-tests.xml`); a group not in it is weighed by its number of tests.
pytest-xdist's own order is by number of tests, which put a one-test file of a minute
and a half at the very end of the queue.

Run alone (after the rest of the suite), the `alone` tests would take about four and a
half minutes in one process, and for two of them the machine is mostly idle: the producer
fairness test spends two minutes draining 6,000 emails at the default 50/s. So
`make test` runs them in two test processes (`-n 2 -m alone`): the fairness test in a
group of its own, everything else in another, and the others start once the fairness
test has measured the second producer's latency (the part of it that the CPU decides);
its drain that follows needs almost none. No test stops the machine's RabbitMQ, which
both processes use: the broker restart runs on a node of its own.

The turn is a file in a directory of this run's own, written by the fairness side and
waited for by the other. Run in one process, or without the fairness test, nobody waits.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections import OrderedDict
from functools import cache
from pathlib import Path

import pytest
from xdist.scheduler import LoadScopeScheduling

from tests.processes import ROOT
from tests.waiting import wait_for

FAIRNESS_TEST = "tests/notify/producers/test_producer_fairness_e2e.py"
MEASURED = "measured"
# Longer than the fairness test's whole run (its drain alone is two minutes): a side
# that never says it is done fails the waiting test instead of hanging the suite.
WAIT_SECONDS = 600.0
GROUP_SECONDS = Path(__file__).with_name("group_seconds.json")
# A group tests/group_seconds.json does not know: about what a test of a short file takes.
UNKNOWN_SECONDS_PER_TEST = 0.5


def alone_run(config: pytest.Config) -> bool:
    """This run is the `alone` tests' (`-m alone`) in several test processes."""
    workers = config.getoption("numprocesses", None) or int(
        os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")
    )
    return config.getoption("markexpr", "") == "alone" and int(workers) >= 2


def group_of(path: str, *, alone: bool) -> str:
    """The group of the tests in `path` (relative to the project): in the `alone` run,
    the fairness test's own or the others'; else its file, or the cluster folder."""
    if alone:
        return "alone:fairness" if path == FAIRNESS_TEST else "alone:others"
    return "tests/cluster" if path.startswith("tests/cluster/") else path


class SuiteScheduling(LoadScopeScheduling):
    """pytest-xdist's scheduling by scope, with `group_of`'s groups as the scopes."""

    def __init__(self, config: pytest.Config, log: object = None) -> None:
        super().__init__(config, log)
        self.alone = alone_run(config)
        self.ordered = False

    def _split_scope(self, nodeid: str) -> str:
        return group_of(nodeid.split("::", 1)[0], alone=self.alone)

    def _assign_work_unit(self, node: object) -> None:
        # The queue is complete before its first unit is handed out (schedule()).
        if not self.ordered:
            self.workqueue = longest_first(self.workqueue)
            self.ordered = True
        super()._assign_work_unit(node)


def longest_first(queue: dict[str, dict[str, bool]]) -> OrderedDict[str, dict[str, bool]]:
    """The groups of `queue` by how long each is expected to take, longest first."""
    known = recorded_group_seconds()

    def seconds(group: str) -> float:
        return known.get(group, UNKNOWN_SECONDS_PER_TEST * len(queue[group]))

    return OrderedDict((group, queue[group]) for group in sorted(queue, key=seconds, reverse=True))


@cache
def recorded_group_seconds() -> dict[str, float]:
    """tests/group_seconds.json: seconds per group in a recent run (empty if missing)."""
    try:
        return json.loads(GROUP_SECONDS.read_text())
    except FileNotFoundError:
        return {}


def turn_signal(name: str) -> None:
    """Say that the fairness side reached `name` (MEASURED); idempotent."""
    folder = _turns_folder()
    if folder is not None:
        folder.mkdir(parents=True, exist_ok=True)
        (folder / name).touch()


def turn_report(report: pytest.TestReport) -> None:
    """The fairness test is done with its measurement once its body ends, passed or not,
    or once its set-up failed (`pytest_runtest_logreport`)."""
    if report.location[0] == FAIRNESS_TEST and (report.when == "call" or report.failed):
        turn_signal(MEASURED)


def turn_wait(item: pytest.Item) -> None:
    """Before an `alone` test other than the fairness one sets up: wait for the fairness
    test's turn to pass, when it runs beside it in another process."""
    if not alone_run(item.config) or not _fairness_beside(item):
        return
    path = _turns_folder() / MEASURED
    wait_for(path.exists, timeout=WAIT_SECONDS, what=f"the fairness test's measurement ({path})")


def _fairness_beside(item: pytest.Item) -> bool:
    """The fairness test is in this run and in another test process than `item`."""
    if _path_of(item) == FAIRNESS_TEST:
        return False
    return any(_path_of(other) == FAIRNESS_TEST for other in item.session.items)


def _turns_folder() -> Path | None:
    """This run's folder of turns (None outside a run of several test processes)."""
    run = os.environ.get("PYTEST_XDIST_TESTRUNUID")
    return Path(tempfile.gettempdir()) / f"notify-alone-{run}" if run else None


def _path_of(item: pytest.Item) -> str:
    """The test's file, relative to the project."""
    return str(Path(str(item.path)).relative_to(ROOT))
