"""SECRET_KEY: refused when weak with DEBUG off; rotating it keeps signed things valid."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys

import pytest

from deliveries.models import Delivery, DeliveryStatus
from deliveries.pipeline.routing import notification_route
from deliveries.support.demo import seed_demo
from notify.checks import secret_key_problem
from notify.models import Category, Notification, Producer, Recipient
from notify.tokens import user_token_issue, user_token_recipient_id
from preferences.gate import gate_seal, gate_seal_valid
from preferences.tokens import (
    LinkProblem,
    preference_center_token,
    preference_center_token_read,
    unsubscribe_token,
    unsubscribe_token_read,
)
from tests.conftest import ROOT
from tests.waiting import wait_for

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


@pytest.mark.parametrize("app", ["config.wsgi", "config.asgi"])
def test_the_web_process_does_not_start_on_the_built_in_key(app):
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_SECRET_KEY"}
    env.update({"DJANGO_SETTINGS_MODULE": "config.settings", "DJANGO_DEBUG": "0"})
    started = subprocess.run(
        [sys.executable, "-c", f"import {app}"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert started.returncode != 0
    assert "built-in development key" in started.stderr

    env["DJANGO_SECRET_KEY"] = "a-long-enough-key-" + "k" * 40
    assert subprocess.run(
        [sys.executable, "-c", f"import {app}"], cwd=ROOT, env=env, timeout=60
    ).returncode == 0  # fmt: skip


@pytest.mark.parametrize(
    ("key", "named"),
    [(None, "built-in development key"), ("short-key", "shorter than 50 characters")],
    ids=["built-in", "short"],
)
@pytest.mark.parametrize(
    ("script", "processes"),
    [("scripts/web.sh", "WEB_CONCURRENCY"), ("scripts/stream.sh", "STREAM_CONCURRENCY")],
    ids=["web", "stream"],
)
def test_the_shipped_web_commands_exit_on_a_weak_key_instead_of_restarting_forever(
    script, processes, key, named
):
    # Two server processes each: with more than one, a process manager restarts each
    # child that refuses to start (uvicorn's without end), and must not be left running.
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_SECRET_KEY"}
    env.update({"DJANGO_SETTINGS_MODULE": "config.settings", "DJANGO_DEBUG": "0",
                "HOST": "127.0.0.1", "PORT": str(port), processes: "2"})  # fmt: skip
    if key is not None:
        env["DJANGO_SECRET_KEY"] = key
    web = subprocess.Popen(
        ["bash", script], cwd=ROOT, env=env, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True, start_new_session=True,
    )  # fmt: skip
    try:
        _, stderr = web.communicate(timeout=10)
    except subprocess.TimeoutExpired:
        os.killpg(web.pid, signal.SIGKILL)  # the server and every child it restarted
        web.communicate()
        pytest.fail(f"{script} was still running 10 s after start on a weak key")
    assert web.returncode != 0
    assert named in stderr


def test_rotating_the_key_keeps_gate_seals_and_user_tokens_valid_through_the_fallbacks(settings):
    settings.SECRET_KEY = OLD_KEY
    settings.SECRET_KEY_FALLBACKS = []
    seal = gate_seal(notification_id="n-1", channel="email", target="a@example.com")
    token = user_token_issue(recipient_id=42)
    link = unsubscribe_token(recipient_id=42, category_id=7, channel="email")
    center = preference_center_token(recipient_id=42)

    settings.SECRET_KEY = NEW_KEY
    settings.SECRET_KEY_FALLBACKS = [OLD_KEY]
    assert gate_seal_valid(notification_id="n-1", channel="email", target="a@example.com",
                           seal=seal)  # fmt: skip
    assert user_token_recipient_id(token) == 42
    assert unsubscribe_token_read(link) is not None
    assert preference_center_token_read(center).recipient_id == 42
    # A seal is still bound to its delivery, whichever key made it.
    assert not gate_seal_valid(notification_id="n-2", channel="email", target="a@example.com",
                               seal=seal)  # fmt: skip

    settings.SECRET_KEY_FALLBACKS = []  # the old key retired: what it signed is refused
    assert not gate_seal_valid(notification_id="n-1", channel="email", target="a@example.com",
                               seal=seal)  # fmt: skip
    assert user_token_recipient_id(token) is None
    assert unsubscribe_token_read(link) is None
    assert preference_center_token_read(center) is LinkProblem.TAMPERED


@pytest.mark.parametrize(
    "command",
    [
        ["-m", "celery", "-A", "config", "worker", "-Q", "medium", "--pool", "threads"],
        ["-m", "celery", "-A", "config", "beat", "-s", "/tmp/notify-test-beat-schedule"],
        ["manage.py", "outbox_relay"],
        ["manage.py", "dead_letter_consumer"],
    ],
    ids=["worker", "beat", "relay", "dead-letters"],
)
def test_the_other_processes_do_not_start_on_the_built_in_key_either(command):
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_SECRET_KEY"}
    env.update({"DJANGO_SETTINGS_MODULE": "config.settings", "DJANGO_DEBUG": "0"})
    started = subprocess.run(
        [sys.executable, *command], cwd=ROOT, env=env, capture_output=True, text=True,
        timeout=60,
    )  # fmt: skip
    assert started.returncode != 0
    assert "built-in development key" in started.stdout + started.stderr


@pytest.mark.e2e
def test_deliveries_sealed_before_a_key_rotation_are_delivered_after_it(
    pipeline, workers_with, settings
):
    smtp = pipeline
    old_key = settings.SECRET_KEY
    # The deliveries are routed (and sealed) here, under the old key, with no worker
    # consuming; then only workers on the new key, the old one as fallback, take them.
    workers_with(DJANGO_SECRET_KEY=NEW_KEY, DJANGO_SECRET_KEY_FALLBACKS=old_key)
    seed_demo()
    producer = Producer.objects.create(name="rotation")
    category = Category.objects.get(key="order.shipped")
    routed = []
    for n in range(3):
        person = Recipient.objects.create(user_id=f"rot-{n}", email=f"rot-{n}@example.com")
        notification = Notification.objects.create(
            producer=producer, event_id=f"rot-{n}", recipient=person, category=category,
            payload={"order_number": f"R-{n}", "delivery_date": "2026-12-03",
                     "items_count": 1},
            channels=["email"], fingerprint="rot",
        )  # fmt: skip
        notification_route(notification_id=str(notification.pk))
        routed.append(notification.pk)

    emails = Delivery.objects.filter(notification_id__in=routed, channel="email")
    wait_for(
        lambda: emails.filter(status=DeliveryStatus.DELIVERED).count() == 3,
        timeout=30,
        what=f"the three emails delivered: {list(emails.values_list('status', 'reason'))}",
    )
    assert sorted(m.rcpt_tos[0] for m in smtp.received) == [
        "rot-0@example.com", "rot-1@example.com", "rot-2@example.com"
    ]  # fmt: skip
