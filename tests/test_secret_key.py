"""SECRET_KEY: refused when weak with DEBUG off; rotating it keeps signed things valid."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from notify.checks import secret_key_problem
from notify.tokens import user_token_issue, user_token_recipient_id
from preferences.gate import gate_seal, gate_seal_valid
from tests.conftest import ROOT

BUILT_IN = "dev-only-insecure-key-change-me-in-any-deployment"
OLD_KEY = "old-key-" + "o" * 60
NEW_KEY = "new-key-" + "n" * 60


@pytest.mark.parametrize(
    ("key", "debug", "refused"),
    [
        (BUILT_IN, False, True),
        ("short-key", False, True),
        ("x" * 49, False, True),
        ("x" * 50, False, False),
        (BUILT_IN, True, False),
    ],
)
def test_a_weak_secret_key_is_refused_only_with_debug_off(key, debug, refused):
    problem = secret_key_problem(secret_key=key, debug=debug, built_in=BUILT_IN)
    assert (problem is not None) is refused


def test_the_web_process_does_not_start_on_the_built_in_key():
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_SECRET_KEY"}
    env.update({"DJANGO_SETTINGS_MODULE": "notify.settings", "DJANGO_DEBUG": "0"})
    started = subprocess.run(
        [sys.executable, "-c", "import notify.asgi"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert started.returncode != 0
    assert "built-in development key" in started.stderr

    env["DJANGO_SECRET_KEY"] = "a-long-enough-key-" + "k" * 40
    assert subprocess.run(
        [sys.executable, "-c", "import notify.asgi"], cwd=ROOT, env=env, timeout=60
    ).returncode == 0  # fmt: skip


def test_rotating_the_key_keeps_gate_seals_and_user_tokens_valid_through_the_fallbacks(settings):
    settings.SECRET_KEY = OLD_KEY
    settings.SECRET_KEY_FALLBACKS = []
    seal = gate_seal(notification_id="n-1", channel="email", target="a@example.com")
    token = user_token_issue(recipient_id=42)

    settings.SECRET_KEY = NEW_KEY
    settings.SECRET_KEY_FALLBACKS = [OLD_KEY]
    assert gate_seal_valid(notification_id="n-1", channel="email", target="a@example.com",
                           seal=seal)  # fmt: skip
    assert user_token_recipient_id(token) == 42
    # A seal is still bound to its delivery, whichever key made it.
    assert not gate_seal_valid(notification_id="n-2", channel="email", target="a@example.com",
                               seal=seal)  # fmt: skip

    settings.SECRET_KEY_FALLBACKS = []  # the old key retired: what it signed is refused
    assert not gate_seal_valid(notification_id="n-1", channel="email", target="a@example.com",
                               seal=seal)  # fmt: skip
    assert user_token_recipient_id(token) is None
