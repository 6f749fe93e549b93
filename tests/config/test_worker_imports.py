"""A worker loads only the provider SDKs of the channels it sends: the email or SMS
worker's start-up never pays for firebase-admin or pywebpush (each is imported by its
channel's module, and that module only when a delivery on its channel is sent)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SDKS = ("firebase_admin", "pywebpush", "py_vapid")

PROBE = """
import json, sys
from config.celery import app
app.loader.import_default_modules()  # what `celery worker` imports: every tasks module
import deliveries.tasks
from deliveries.channels import provider_for
provider_for("email")
loaded = sorted({m.split(".")[0] for m in sys.modules} & set(json.loads(sys.argv[1])))
print(json.dumps(loaded))
"""


def sdks_loaded(probe: str) -> list[str]:
    """The SDKs a fresh worker process has imported once `probe` has run."""
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "tests.settings"}
    done = subprocess.run(
        [sys.executable, "-c", probe, json.dumps(SDKS)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_an_email_worker_loads_no_push_sdk():
    assert sdks_loaded(PROBE) == []


def test_the_push_channels_load_their_sdk_when_first_used():
    probe = PROBE.replace('provider_for("email")', 'provider_for("fcm"); provider_for("webpush")')
    assert {"firebase_admin", "pywebpush"} <= set(sdks_loaded(probe))
