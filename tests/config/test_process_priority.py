"""Campaign processes yield the CPU: the shipped scripts start the `low` relay and worker
niced and under Linux's SCHED_IDLE (a waking login-code thread takes their CPU at once),
the analytics shipper niced (its figures may lag), and the transactional ones as usual."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from tests.processes import ScriptProcess


def started(script: str, *args: str, env: dict[str, str]) -> ScriptProcess:
    """The script's process once its exec chain reached Python (its pid stays the same)."""
    name = "-".join(("priority", script, *args))
    process = ScriptProcess(script, *args, env=env, name=name)
    process.start()
    deadline = time.monotonic() + 20
    cmdline = Path(f"/proc/{process.process.pid}/cmdline")
    while b"python" not in cmdline.read_bytes():
        assert process.running, process.log()
        assert time.monotonic() < deadline, "the script never reached its program"
        time.sleep(0.05)
    return process


@pytest.mark.parametrize(
    ("script", "args", "overrides", "policy", "niceness"),
    [
        ("relay.sh", ("low",), {}, os.SCHED_IDLE, 10),
        ("relay.sh", ("low",), {"RELAY_LOW_SCHED": "other"}, os.SCHED_OTHER, 10),
        ("relay.sh", ("high,medium",), {}, os.SCHED_OTHER, 0),
        ("worker.sh", ("low",), {"WORKER_PROCESSES": "1"}, os.SCHED_IDLE, 10),
        ("worker.sh", ("high",), {}, os.SCHED_OTHER, 0),
        ("analytics.sh", (), {}, os.SCHED_OTHER, 10),
        ("analytics.sh", (), {"ANALYTICS_NICE": "0"}, os.SCHED_OTHER, 0),
    ],
)
def test_campaign_processes_run_under_sched_idle_and_niced(
    worker_env, tmp_path, script, args, overrides, policy, niceness
):
    # The shipper's embedded store gets a directory of its own (the others ignore it).
    env = {**worker_env, "NOTIFY_ANALYTICS_DATA_DIR": str(tmp_path / "store"), **overrides}
    process = started(script, *args, env=env)
    try:
        pid = process.process.pid
        assert os.sched_getscheduler(pid) == policy
        assert os.getpriority(os.PRIO_PROCESS, pid) == niceness
    finally:
        process.stop()


def test_an_unknown_policy_stops_the_script_with_its_reason(worker_env):
    process = ScriptProcess(
        "relay.sh", "low", env={**worker_env, "RELAY_LOW_SCHED": "fifo"}, name="priority-bad"
    )
    process.start()
    assert process.process.wait(timeout=20) == 2
    assert "unknown scheduling policy 'fifo' (idle or other)" in process.log()
