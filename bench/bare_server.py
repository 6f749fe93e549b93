"""The bare baselines' server: the simplest deployment a Django team would pick.

The bare DRF views (bench.views) under gunicorn with WEB_CONCURRENCY sync workers, on a
port of their own, beside (never inside) the server under test: whatever the shipped
web tier costs or saves shows in the ratio.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from bench.config import LOOPBACK, env_int
from bench.processes import Proc, python, wait_http
from scripts.ports import unused_port

if TYPE_CHECKING:  # bench.runner imports the scenarios that use this module
    from bench.runner import Bench

WSGI_APP = "config.wsgi:application"


def bare_server_argv(port: int, processes: int) -> list[str]:
    """gunicorn, sync workers, the bare views only (bench.bare_settings)."""
    return [
        python(),
        "-m",
        "gunicorn",
        WSGI_APP,
        "--worker-class",
        "sync",
        "--workers",
        str(processes),
        "--bind",
        f"{LOOPBACK}:{port}",
    ]


def start_bare_server(bench: Bench) -> tuple[Proc, int, str]:
    """Start the bare baselines' server once /healthz answers; (process, port, what)."""
    processes = env_int("WEB_CONCURRENCY", 2)
    port = unused_port()
    env = {**bench.env, "DJANGO_SETTINGS_MODULE": "bench.bare_settings"}
    proc = bench.stack.start("bare", bare_server_argv(port, processes), env)
    wait_http(f"http://{LOOPBACK}:{port}/healthz", proc)
    return proc, port, f"gunicorn, {processes} sync workers, bare DRF views only, port {port}"
