"""`python -m bench.servers`: which ASGI server to ship in scripts/web.sh, by measurement.

Each installed candidate serves config.asgi:application (under bench.settings, DEBUG
off) with WEB_CONCURRENCY processes; then, round-robin across the candidates so noise
hits them all alike, BENCH_RUNS wrk runs of POST /v1/notifications and of the bare
intake at BENCH_CONNECTIONS connections. Prints the median req/s and p99 of each.
Candidates that are not installed are skipped (pip install gunicorn uvicorn-worker
granian to try them all). Same database, vhost and Redis db as `python -m bench`.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import statistics
import sys
from pathlib import Path

from bench.config import LOOPBACK, BenchError, Config, env_int
from bench.places import Places
from bench.processes import Proc, Stack, free_port, wait_http
from bench.report import machine_line, phase
from bench.runner import Bench
from bench.wrk import LoadResult, ensure_wrk

APP = "config.asgi:application"


def _tool(name: str) -> str | None:
    local = Path(".venv/bin") / name
    return str(local) if local.exists() else shutil.which(name)


def candidates(port: int, processes: int) -> dict[str, list[str]]:
    """name -> argv, for the candidates whose programs are installed."""
    found: dict[str, list[str]] = {}
    if uvicorn := _tool("uvicorn"):
        found["uvicorn --workers"] = [
            uvicorn, APP, "--host", LOOPBACK, "--port", str(port), "--workers", str(processes),
            "--loop", "uvloop", "--http", "httptools", "--no-access-log",
        ]  # fmt: skip
    gunicorn = _tool("gunicorn")
    if gunicorn and importlib.util.find_spec("uvicorn_worker") is not None:
        found["gunicorn + uvicorn-worker"] = [
            gunicorn, APP, "-k", "uvicorn_worker.UvicornWorker", "-w", str(processes),
            "-b", f"{LOOPBACK}:{port}",
        ]  # fmt: skip
    if granian := _tool("granian"):
        found["granian"] = [
            granian, "--interface", "asginl", "--workers", str(processes), "--host", LOOPBACK,
            "--port", str(port), "--loop", "uvloop", "--no-access-log", APP,
        ]  # fmt: skip
    return found


def main() -> int:
    print(machine_line(), flush=True)
    config = Config.from_environment()
    processes = env_int("WEB_CONCURRENCY", 2)
    wrk = ensure_wrk()
    with Stack() as stack:
        bench = Bench(config, Places.from_environment(), stack, wrk)
        bench.prepare()
        bare, real = bench.intake_loads()
        servers: dict[str, tuple[Proc, int]] = {}
        for name in candidates(0, processes):
            port = free_port()
            with phase(f"starting {name}"):
                proc = stack.start(name.split()[0], candidates(port, processes)[name], bench.env)
                try:
                    wait_http(f"http://{LOOPBACK}:{port}/healthz", proc)
                except BenchError as error:
                    print(f"{name}: does not start: {error}")
                    stack.stop(proc)
                    continue
            servers[name] = (proc, port)
        results: dict[str, dict[str, list[LoadResult]]] = {
            name: {"real": [], "bare": []} for name in servers
        }
        with phase(f"{len(servers)} servers x {config.runs} runs"):
            for _, port in servers.values():
                for load in (bare, real):  # warm-up
                    bench.wrk(port, load, config.connections, config.warmup_seconds)
            for _ in range(config.runs):
                for name, (_, port) in servers.items():
                    for kind, load in (("bare", bare), ("real", real)):
                        result = bench.wrk(port, load, config.connections, config.seconds)
                        results[name][kind].append(result)
        print(
            f"POST at {config.connections} connections, {processes} processes, medians of "
            f"{config.runs} x {config.seconds:.0f} s:"
        )
        for name, kinds in results.items():
            real_runs, bare_runs = kinds["real"], kinds["bare"]
            bad = sum(r.unexpected + r.socket_errors for r in real_runs + bare_runs)
            print(
                f"  {name:<28} /v1/notifications "
                f"{statistics.median(r.rps for r in real_runs):5.0f} req/s "
                f"p99 {statistics.median(r.p99_ms for r in real_runs):6.1f} ms | bare "
                f"{statistics.median(r.rps for r in bare_runs):5.0f} req/s "
                f"p99 {statistics.median(r.p99_ms for r in bare_runs):6.1f} ms"
                + (f" | {bad} failed" if bad else "")
            )
    return 0


if __name__ == "__main__":
    os.chdir(Path(__file__).resolve().parent.parent)
    sys.exit(main())
