"""The HTTP scenarios' frame: one scripts/web.sh, then S1, S5 and load against it.

Works out the PostgreSQL connection budgets that the measured peaks are printed next to
(docs/connections.md), starts the web server once for all three and the bare baselines'
own server beside it (bench.bare_server), and stops both after.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from bench.bare_server import start_bare_server
from bench.client_load import scenario_load
from bench.config import (
    LOOPBACK,
    SMALL_POOL_DEFAULT,
    STREAM_POOL_DEFAULT,
    WEB_THREADS_DEFAULT,
    env_int,
)
from bench.intake_unread import scenario_s1, scenario_s5
from bench.places import max_connections
from bench.processes import Proc, wait_http
from bench.report import phase
from scripts.ports import unused_port

if TYPE_CHECKING:  # bench.runner imports this module to run it
    from bench.runner import Bench


def start_web(
    bench: Bench, env: dict[str, str] | None = None, name: str = "web"
) -> tuple[Proc, int]:
    """scripts/web.sh on a free loopback port, once /healthz answers; (process, port).
    `env`: the process's environment when not the bench's own."""
    port = unused_port()
    web = bench.stack.start(
        name,
        ["bash", "scripts/web.sh"],
        {**(env or bench.env), "HOST": LOOPBACK, "PORT": str(port)},
    )
    wait_http(f"http://{LOOPBACK}:{port}/healthz", web)
    return web, port


def web_server_line(web: Proc) -> str:
    """What scripts/web.sh started, as its first log line that names the server."""
    for line in web.tail(200).splitlines():
        if "Using worker" in line or "Started parent process" in line:
            return line.rsplit("] ", 1)[-1].strip()
    return "see its log"


def outside_in(bench: Bench, ports: tuple[int, int], wanted: list[str]) -> None:
    """S1o and S5o: S1 and S5 as they were measured from outside, as a new user would:
    wrk with 2 threads, rounds of 10 s (3 alternating, as BENCH_RUNS), same servers."""
    bench_config = bench.config
    bench.config = dataclasses.replace(bench_config, wrk_threads=2, seconds=10.0)
    try:
        if "s1o" in wanted:
            with phase("S1o intake, from outside"):
                bench.guard("S1o", lambda: scenario_s1(bench, ports, label="S1o"))
        if "s5o" in wanted:
            with phase("S5o unread count, from outside"):
                bench.guard("S5o", lambda: scenario_s5(bench, ports, label="S5o"))
    finally:
        bench.config = bench_config


def http_scenarios(bench: Bench) -> None:
    """Run whichever of S1, S5 and load BENCH_ONLY picks, against one web server."""
    wanted = [name for name in ("s1", "s5", "s1o", "s5o", "load") if name in bench.config.only]
    if not wanted:
        return
    web_processes = env_int("WEB_CONCURRENCY", 2)
    worker_pool = env_int("DATABASE_POOL_MAX_SIZE", env_int("WORKER_CONCURRENCY", 8) + 2)
    web_pool = env_int("DATABASE_POOL_MAX_SIZE", env_int("WEB_THREADS", WEB_THREADS_DEFAULT))
    budget_web = web_processes * web_pool
    # stream, beat and relay pools, plus the relay's LISTEN connection (outside its pool).
    budget_all = budget_web + STREAM_POOL_DEFAULT + 3 * worker_pool + 2 * SMALL_POOL_DEFAULT + 1
    limit = max_connections(bench.places)
    with phase("starting scripts/web.sh and the bare baselines' server"):
        web, port = start_web(bench)
        bare, bare_port, bare_what = start_bare_server(bench)
    print(
        f"servers: under test scripts/web.sh ({web_server_line(web)}), "
        f"WEB_CONCURRENCY={web_processes}, DEBUG off, port {port}; "
        f"baselines: {bare_what}"
    )
    ports = (bare_port, port)
    peaks: list[int] = []
    try:
        if "s1" in wanted:
            with phase("S1 intake"):
                peaks.append(bench.guard("S1", lambda: scenario_s1(bench, ports)) or 0)
        if "s5" in wanted:
            with phase("S5 unread count"):
                peaks.append(bench.guard("S5", lambda: scenario_s5(bench, ports)) or 0)
        if "s1o" in wanted or "s5o" in wanted:
            outside_in(bench, ports, wanted)
        if peaks:
            print(
                f"S1/S5 peak PostgreSQL backends: {max(peaks)} "
                f"(web budget {web_processes} x pool max = {budget_web})"
            )
        if "load" in wanted:
            with phase(f"load: {bench.config.load_connections} clients"):
                bench.guard(
                    "load", lambda: scenario_load(bench, ports, budget_web, budget_all, limit)
                )
    finally:
        bench.stack.stop(bare)
        bench.stack.stop(web)
