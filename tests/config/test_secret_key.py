"""SECRET_KEY: refused when weak or known with DEBUG off (so is a known erasure key, and
compose has no default for either); rotating it keeps signed things valid."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys

import pytest
import yaml

from deliveries.models import Delivery, DeliveryStatus
from deliveries.pipeline.routing import notification_route
from deliveries.support.demo import seed_demo
from notify.checks import KNOWN_DEFAULT_KEYS, secret_key_problem, signing_keys_problem
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
# What docker-compose.yml defaulted to: long enough, and known to anyone.
COMPOSE_KEY = "compose-dev-only-insecure-key-change-me-before-any-real-use-0123456789"
ERASURE_BUILT_IN = "dev-only-erasure-key-change-me-in-any-deployment"
KNOWN_MESSAGE = "known development key"
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
        (COMPOSE_KEY, False, True),
        ("django-insecure-" + "x" * 50, False, True),
        (COMPOSE_KEY, True, False),
    ],
)
def test_a_weak_secret_key_is_refused_only_with_debug_off(key, debug, refused):
    problem = secret_key_problem(secret_key=key, debug=debug, known=KNOWN_DEFAULT_KEYS)
    assert (problem is not None) is refused
    if refused:
        assert "set DJANGO_SECRET_KEY to a long random value" in problem


def test_a_known_key_among_the_fallbacks_is_refused():
    good = "a-long-enough-key-" + "k" * 40
    problem = signing_keys_problem(
        secret_key=good,
        fallbacks=[good + "-old", COMPOSE_KEY],
        debug=False,
        known=KNOWN_DEFAULT_KEYS,
    )
    assert problem is not None and "FALLBACKS entry 2" in problem
    assert (
        signing_keys_problem(
            secret_key=good, fallbacks=[good + "-old"], debug=False, known=KNOWN_DEFAULT_KEYS
        )
        is None
    )


# WSGI's refusal and start are covered with every known key below.
@pytest.mark.parametrize("app", ["config.asgi"])
def test_the_web_process_does_not_start_on_the_built_in_key(app):
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_SECRET_KEY"}
    env.update({"DJANGO_SETTINGS_MODULE": "config.settings", "DJANGO_DEBUG": "0"})
    started = subprocess.run(
        [sys.executable, "-c", f"import {app}"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert started.returncode != 0
    assert KNOWN_MESSAGE in started.stderr

    env["DJANGO_SECRET_KEY"] = "a-long-enough-key-" + "k" * 40
    assert (
        subprocess.run(
            [sys.executable, "-c", f"import {app}"], cwd=ROOT, env=env, timeout=60
        ).returncode
        == 0
    )


@pytest.mark.parametrize(
    ("key", "named"),
    [(None, KNOWN_MESSAGE), ("short-key", "shorter than 50 characters")],
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
    env.update(
        {
            "DJANGO_SETTINGS_MODULE": "config.settings",
            "DJANGO_DEBUG": "0",
            "HOST": "127.0.0.1",
            "PORT": str(port),
            processes: "2",
        }
    )
    if key is not None:
        env["DJANGO_SECRET_KEY"] = key
    web = subprocess.Popen(
        ["bash", script],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
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
    assert gate_seal_valid(
        notification_id="n-1", channel="email", target="a@example.com", seal=seal
    )
    assert user_token_recipient_id(token) == 42
    assert unsubscribe_token_read(link) is not None
    assert preference_center_token_read(center).recipient_id == 42
    # A seal is still bound to its delivery, whichever key made it.
    assert not gate_seal_valid(
        notification_id="n-2", channel="email", target="a@example.com", seal=seal
    )

    settings.SECRET_KEY_FALLBACKS = []  # the old key retired: what it signed is refused
    assert not gate_seal_valid(
        notification_id="n-1", channel="email", target="a@example.com", seal=seal
    )
    assert user_token_recipient_id(token) is None
    assert unsubscribe_token_read(link) is None
    assert preference_center_token_read(center) is LinkProblem.TAMPERED


@pytest.mark.parametrize(
    "command",
    [
        # The worker's refusal is covered with the known keys below.
        ["-m", "celery", "-A", "config", "beat", "-s", "/tmp/notify-test-beat-schedule"],
        ["manage.py", "outbox_relay"],
        ["manage.py", "dead_letter_consumer"],
    ],
    ids=["beat", "relay", "dead-letters"],
)
def test_the_other_processes_do_not_start_on_the_built_in_key_either(command):
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_SECRET_KEY"}
    env.update({"DJANGO_SETTINGS_MODULE": "config.settings", "DJANGO_DEBUG": "0"})
    started = subprocess.run(
        [sys.executable, *command],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert started.returncode != 0
    assert KNOWN_MESSAGE in started.stdout + started.stderr


def _started(command: list[str], **env_set: str | None) -> subprocess.CompletedProcess:
    """Run `command` (python arguments) with DEBUG off and the settings of a deployment,
    `env_set` changing the environment (None: unset)."""
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "config.settings", "DJANGO_DEBUG": "0"}
    for name, value in env_set.items():
        if value is None:
            env.pop(name, None)
        else:
            env[name] = value
    return subprocess.run(
        [sys.executable, *command],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


GOOD_KEY = "a-long-enough-key-" + "k" * 40
# How a refusal says to make a key.
SET_ONE = "a long random value, e.g. python3 -c 'import secrets; print(secrets.token_urlsafe(50))'"
WEB = ["-c", "import config.wsgi"]
WORKER = ["-m", "celery", "-A", "config", "worker", "-Q", "medium", "--pool", "threads"]
CHECK_DEPLOY = ["manage.py", "check", "--deploy"]


KNOWN_KEYS = {
    "built-in": ({"DJANGO_SECRET_KEY": None}, "SECRET_KEY is a known", SET_ONE),
    "compose": ({"DJANGO_SECRET_KEY": COMPOSE_KEY}, "SECRET_KEY is a known", SET_ONE),
    "fallback": (
        {"DJANGO_SECRET_KEY_FALLBACKS": COMPOSE_KEY},
        "FALLBACKS entry 1 is a known",
        "remove it from DJANGO_SECRET_KEY_FALLBACKS",
    ),
    "erasure-unset": ({"NOTIFY_ERASURE_KEY": None}, "NOTIFY_ERASURE_KEY is a known", SET_ONE),
    "erasure-built-in": (
        {"NOTIFY_ERASURE_KEY": ERASURE_BUILT_IN},
        "NOTIFY_ERASURE_KEY is a known",
        SET_ONE,
    ),
}


def known_key_cases() -> list:
    """Every known key with `check --deploy`, whose two checks (signing keys, erasure key)
    are wired apart; the web and worker processes both refuse through one rule over all the
    keys (notify.checks), so each is tried with one signing key and one erasure key, each
    start costing a whole process."""
    cases = [
        pytest.param(CHECK_DEPLOY, *KNOWN_KEYS[kind], id=f"{kind}-check") for kind in KNOWN_KEYS
    ]
    for name, command in (("web", WEB), ("worker", WORKER)):
        for kind in ("built-in", "erasure-unset"):
            cases.append(pytest.param(command, *KNOWN_KEYS[kind], id=f"{kind}-{name}"))
    return cases


@pytest.mark.parametrize(("command", "settings_env", "named", "advice"), known_key_cases())
def test_a_process_does_not_start_on_a_known_key_and_says_how_to_set_one(
    command, settings_env, named, advice
):
    started = _started(
        command, **{"DJANGO_SECRET_KEY": GOOD_KEY, "NOTIFY_ERASURE_KEY": GOOD_KEY, **settings_env}
    )
    said = started.stdout + started.stderr
    assert started.returncode != 0
    assert named in said
    assert advice in said


def test_a_process_starts_on_keys_of_its_own():
    started = _started(WEB, DJANGO_SECRET_KEY=GOOD_KEY, NOTIFY_ERASURE_KEY=GOOD_KEY)
    assert started.returncode == 0, started.stderr


COMPOSE_FILES = ["docker-compose.yml", "docker-compose.cluster.yml"]
REQUIRED = {
    name: re.compile(r"\$\{" + name + r":\?[^}]+\}")
    for name in ("DJANGO_SECRET_KEY", "NOTIFY_ERASURE_KEY")
}


@pytest.mark.parametrize("compose_file", COMPOSE_FILES)
def test_compose_refuses_to_start_without_keys_of_your_own(compose_file):
    """Every service that sets a key requires it from the environment (`${NAME:?…}`, no
    default), and every service running the app sets both."""
    services = yaml.safe_load((ROOT / compose_file).read_text())["services"]
    app_services = 0
    for name, service in services.items():
        environment = service.get("environment") or {}
        if isinstance(environment, list):
            environment = dict(item.partition("=")[::2] for item in environment)
        for key, required in REQUIRED.items():
            if key in environment:
                assert required.fullmatch(str(environment[key])), (name, environment[key])
        if service.get("image") == "notify:local":
            app_services += 1
            assert set(REQUIRED) <= set(environment), name
    assert app_services >= 5
    assert COMPOSE_KEY not in (ROOT / compose_file).read_text()


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
            producer=producer,
            event_id=f"rot-{n}",
            recipient=person,
            category=category,
            payload={"order_number": f"R-{n}", "delivery_date": "2026-12-03", "items_count": 1},
            channels=["email"],
            fingerprint="rot",
        )
        notification_route(notification_id=str(notification.pk))
        routed.append(notification.pk)

    emails = Delivery.objects.filter(notification_id__in=routed, channel="email")
    wait_for(
        lambda: emails.filter(status=DeliveryStatus.DELIVERED).count() == 3,
        timeout=30,
        what=f"the three emails delivered: {list(emails.values_list('status', 'reason'))}",
    )
    assert sorted(m.rcpt_tos[0] for m in smtp.received) == [
        "rot-0@example.com",
        "rot-1@example.com",
        "rot-2@example.com",
    ]
