"""The suite hands out its longest groups first (tests/scheduling.py), from the seconds
scripts/test_durations.py records."""

from __future__ import annotations

from pathlib import Path

from scripts.test_durations import group_seconds
from tests.scheduling import UNKNOWN_SECONDS_PER_TEST, longest_first, recorded_group_seconds

JUNIT = """<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest">
<testcase classname="tests.config.test_secret_key" name="a" time="40.5"/>
<testcase classname="tests.config.test_secret_key" name="b" time="1.5"/>
<testcase classname="tests.cluster.test_broker_cluster" name="c" time="30"/>
<testcase classname="tests.cluster.test_queue_kind" name="d" time="5"/>
<testcase classname="tests.flow.test_priority" name="e" time="0.2"/>
</testsuite></testsuites>
"""


def test_a_run_records_each_groups_seconds_and_leaves_out_the_short_ones(tmp_path: Path):
    junit = tmp_path / "junit.xml"
    junit.write_text(JUNIT)

    assert group_seconds(junit) == {
        "tests/config/test_secret_key.py": 42.0,
        "tests/cluster": 35.0,  # the cluster folder is one group
    }


def test_a_one_test_file_of_a_minute_is_handed_out_before_a_large_quick_one():
    recorded = recorded_group_seconds()
    slow = max(recorded, key=recorded.get)
    unknown = "tests/not_recorded.py"
    many = {f"{unknown}::test_{i}": False for i in range(int(recorded[slow]))}
    queue = {unknown: many, slow: {f"{slow}::test_it": False}}

    order = list(longest_first(queue))

    assert order == [slow, unknown]
    assert len(many) * UNKNOWN_SECONDS_PER_TEST < recorded[slow]
