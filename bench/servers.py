"""`python -m bench.servers`: which web server to ship in scripts/web.sh, by measurement.

Each candidate serves the project (under bench.settings, DEBUG off) with WEB_CONCURRENCY
processes; the bare DRF views run on a server of their own (bench.bare_server: gunicorn
sync workers). Then, round-robin across the bare server and the candidates so noise hits
them all alike, BENCH_RUNS wrk runs at BENCH_CONNECTIONS connections of
POST /v1/notifications (S1) and GET …/unread-count (S5), against the bare intake and the
bare Redis read. Prints the median req/s and p99 of each and the ratios to the bare
server. Same database, vhost and Redis db as `python -m bench`. docs/web-tier.md keeps
the figures.
"""

from __future__ import annotations

import os
import statistics
import sys
from pathlib import Path

from bench.bare_server import start_bare_server
from bench.config import DEMO_USER, LOOPBACK, Config, env_int
from bench.places import Places
from bench.processes import Proc, Stack, python, wait_http
from bench.report import machine_line, phase
from bench.runner import Bench
from bench.wrk import Load, LoadResult, ensure_wrk
from scripts.ports import unused_port

ASGI = "config.asgi:application"
WSGI = "config.wsgi:application"


def candidates(port: int, processes: int) -> dict[str, tuple[list[str], dict[str, str]]]:
    """name -> (argv, extra environment): the web tiers measured."""
    bind = f"{LOOPBACK}:{port}"
    gunicorn = [python(), "-m", "gunicorn", WSGI, "-b", bind, "-w", str(processes)]
    found = {
        "uvicorn, ASGI (before)": (
            [
                python(),
                "-m",
                "uvicorn",
                ASGI,
                "--host",
                LOOPBACK,
                "--port",
                str(port),
                "--workers",
                str(processes),
                "--loop",
                "uvloop",
                "--http",
                "httptools",
                "--no-access-log",
                "--lifespan",
                "off",
            ],
            {"DATABASE_POOL_MAX_SIZE": "10"},
        ),
        "gunicorn sync, WSGI": ([*gunicorn, "-k", "sync"], {"DATABASE_POOL_MAX_SIZE": "1"}),
    }
    for threads in (int(t) for t in os.environ.get("BENCH_SERVER_THREADS", "2,4").split(",")):
        found[f"gunicorn gthread x{threads}, WSGI"] = (
            [*gunicorn, "-k", "gthread", "--threads", str(threads)],
            {"DATABASE_POOL_MAX_SIZE": str(threads)},
        )
    return found


def _line(name: str, runs: list[LoadResult], bare: list[LoadResult]) -> str:
    rps = statistics.median(r.rps for r in runs)
    p99 = statistics.median(r.p99_ms for r in runs)
    bare_rps = statistics.median(r.rps for r in bare)
    bare_p99 = statistics.median(r.p99_ms for r in bare)
    bad = sum(r.unexpected + r.socket_errors for r in runs)
    return (
        f"  {name:<30} {rps:6.0f} req/s p99 {p99:7.1f} ms | {rps / bare_rps:5.2f}x bare "
        f"req/s, p99 {p99 / bare_p99:5.2f}x" + (f" | {bad} failed" if bad else "")
    )


def main() -> int:
    print(machine_line(), flush=True)
    config = Config.from_environment()
    processes = env_int("WEB_CONCURRENCY", 2)
    wrk = ensure_wrk()
    with Stack() as stack:
        bench = Bench(config, Places.from_environment(), stack, wrk)
        bench.prepare()
        bare_intake, real_intake = bench.intake_loads()
        bare_unread = Load("GET", f"/bench/bare-unread/{DEMO_USER}", 200)
        real_unread = Load("GET", f"/v1/users/{DEMO_USER}/unread-count", 200, api_key=bench.api_key)
        with phase("starting the bare server"):
            _, bare_port, bare_what = start_bare_server(bench)
        servers: dict[str, tuple[Proc, int]] = {}
        for name in candidates(0, processes):
            port = unused_port()
            argv, extra = candidates(port, processes)[name]
            with phase(f"starting {name}"):
                proc = stack.start(
                    name.split(",")[0].replace(" ", "-"), argv, {**bench.env, **extra}
                )
                wait_http(f"http://{LOOPBACK}:{port}/healthz", proc)
            servers[name] = (proc, port)
        kinds = {"S1": (bare_intake, real_intake), "S5": (bare_unread, real_unread)}
        results: dict[tuple[str, str], list[LoadResult]] = {}
        with phase(f"bare + {len(servers)} servers x {config.runs} runs"):
            for bare, real in kinds.values():  # warm-up
                bench.wrk(bare_port, bare, config.connections, config.warmup_seconds)
                for _, port in servers.values():
                    bench.wrk(port, real, config.connections, config.warmup_seconds)
            for _ in range(config.runs):
                for kind, (bare, real) in kinds.items():
                    results.setdefault((kind, "bare"), []).append(
                        bench.wrk(bare_port, bare, config.connections, config.seconds)
                    )
                    for name, (_, port) in servers.items():
                        results.setdefault((kind, name), []).append(
                            bench.wrk(port, real, config.connections, config.seconds)
                        )
        print(
            f"{config.connections} connections, {processes} processes, medians of "
            f"{config.runs} x {config.seconds:.0f} s; baselines: {bare_what}"
        )
        for kind in kinds:
            bare_runs = results[(kind, "bare")]
            print(f"{kind}:")
            print(_line("bare DRF view", bare_runs, bare_runs))
            for name in servers:
                print(_line(name, results[(kind, name)], bare_runs))
    return 0


if __name__ == "__main__":
    os.chdir(Path(__file__).resolve().parent.parent)
    sys.exit(main())
