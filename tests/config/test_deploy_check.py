"""`manage.py check --deploy` with production settings from the environment finds nothing."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys

from tests.processes import ROOT

# What a deployer sets (README "Deploying"): DEBUG off, long random keys, its host names,
# HTTPS with the TLS proxy's header.
PRODUCTION = {
    "DJANGO_SETTINGS_MODULE": "config.settings",
    "DJANGO_DEBUG": "0",
    "DJANGO_SECRET_KEY": secrets.token_urlsafe(64),
    "NOTIFY_ERASURE_KEY": secrets.token_urlsafe(48),
    "DJANGO_ALLOWED_HOSTS": "notify.example.com",
    "DJANGO_CSRF_TRUSTED_ORIGINS": "https://notify.example.com",
    "NOTIFY_PUBLIC_URL": "https://notify.example.com",
    "DJANGO_HTTPS": "1",
    "DJANGO_SECURE_PROXY_SSL_HEADER": "X-Forwarded-Proto",
}


def _check_deploy(**overrides: str) -> subprocess.CompletedProcess:
    env = {**os.environ, **PRODUCTION, **overrides}
    return subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_check_deploy_reports_nothing_with_production_settings():
    result = _check_deploy()
    assert result.returncode == 0, result.stdout + result.stderr
    assert "System check identified no issues" in result.stdout


def test_check_deploy_names_what_a_plain_http_setup_lacks():
    # The local defaults (plain http for `make run`) are not a deployment: it says so.
    result = _check_deploy(DJANGO_HTTPS="0")
    assert result.returncode != 0
    for warning in ("security.W004", "security.W008", "security.W012", "security.W016"):
        assert warning in result.stderr + result.stdout


def test_check_deploy_refuses_the_inbox_demo_page():
    result = _check_deploy(NOTIFY_INBOX_DEMO="1")
    assert result.returncode != 0
    assert "notify.E003" in result.stderr + result.stdout
