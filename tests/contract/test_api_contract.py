"""The API keeps its OpenAPI contract: schemathesis against the live server.

The web server runs as deployed (scripts/web.sh); schemathesis reads /v1/schema and runs
every check in every phase (examples, coverage, fuzzing, and the stateful phase that
chains operations through their answers) with a producer key that has every scope.
Any 5xx, any status or body the schema does not document, any schema-valid request
refused or schema-violating request accepted fails the test. What the schema cannot
say by itself is in schemathesis.toml beside this file, with the reason.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from notify.api.serializers import FEED_CURSOR_FORMAT, TIME_ZONE_FORMAT
from notify.api_keys import api_key_issue
from notify.models import Category, Scope
from tests.processes import ARTIFACTS, WebProcess

CONFIG = Path(__file__).with_name("schemathesis.toml")
# How the fuzzer draws values of the schema's named formats (a time zone's name, a feed
# cursor).
HOOKS = Path(__file__).with_name("schemathesis_hooks.py")
# Bounds the run (about 40 s here): examples per operation and phase. A fixed seed makes
# a failure reproducible; NOTIFY_CONTRACT_SEED picks another.
MAX_EXAMPLES = 12


@pytest.fixture
def live_web(transactional_db, worker_env):
    from deliveries.support.demo import seed_demo

    seed_demo()
    web = WebProcess(worker_env, name="web-contract")
    web.start()
    yield web
    web.stop()


def test_the_live_api_keeps_its_openapi_contract(live_web, tmp_path):
    hooks = HOOKS.read_text()
    assert f'TIME_ZONE_FORMAT = "{TIME_ZONE_FORMAT}"' in hooks
    assert f'FEED_CURSOR_FORMAT = "{FEED_CURSOR_FORMAT}"' in hooks
    # Every scope and every category, as an outside client holding them all would call;
    # its producer owns the demo categories, so their digest settings can be changed.
    issued = api_key_issue(producer_name="contract", scopes=list(Scope.values))
    Category.objects.update(owner=issued.api_key.producer)
    # The fuzzer sends hundreds of requests a second; the limit itself has its own tests.
    issued.api_key.rate_per_second = 10_000
    issued.api_key.rate_burst = 100_000
    issued.api_key.save()
    seed = os.environ.get("NOTIFY_CONTRACT_SEED", "1")
    command = [
        str(Path(sys.executable).with_name("st")),
        "--config-file", str(CONFIG),
        "run", f"{live_web.url}/v1/schema",
        "--header", f"Authorization: Bearer {issued.key}",
        "--checks", "all",
        "--phases", "examples,coverage,fuzzing,stateful",
        "--max-examples", str(MAX_EXAMPLES),
        "--seed", seed,
        # The live stream answers 200 by streaming until its lifetime ends: a fuzzer's
        # request would wait out its timeout. Its schema and errors are checked in
        # test_schema_statuses.py.
        "--exclude-path", "/v1/users/{user_id}/stream",
        "--workers", "1",
        "--request-timeout", "10",
        "--no-color",
    ]  # fmt: skip
    run = subprocess.run(
        command,
        cwd=tmp_path,
        env={**os.environ, "SCHEMATHESIS_HOOKS": str(HOOKS)},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    ARTIFACTS.mkdir(exist_ok=True)
    (ARTIFACTS / "schemathesis.log").write_text(run.stdout + run.stderr)
    assert run.returncode == 0, (
        "schemathesis found contract failures (full log: artifacts/schemathesis.log):\n"
        + run.stdout[-6000:]
    )
    assert "Stateful" in run.stdout  # the phase ran
