"""anymail (and each provider's SDK) loads only where an ESP is used: a process that
sends over SMTP and has not received a provider's webhook never imports it."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.processes import ROOT

PROBE = """
import sys
import django
django.setup()
from django.urls import resolve
import config.urls
import deliveries.channels.email
from deliveries.channels import provider_for
provider_for("email").sessions_close()
resolve("/v1/webhooks/email/postmark/tracking/")
print("before", "anymail" in sys.modules, "boto3" in sys.modules)
import deliveries.api.esp_tracking.postmark
print("after", "anymail" in sys.modules)
"""


def test_smtp_processes_never_import_anymail():
    env = {**os.environ, "NOTIFY_EMAIL_ESP": "", "DJANGO_SETTINGS_MODULE": "tests.settings"}
    done = subprocess.run(
        [sys.executable, "-c", PROBE], cwd=ROOT, env=env, capture_output=True, text=True,
        timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[:2] == ["before False False", "after True"]
