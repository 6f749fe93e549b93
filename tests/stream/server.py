"""The ASGI app (the live stream) under uvicorn, as deployed, for tests."""

from __future__ import annotations

import contextlib


@contextlib.contextmanager
def asgi_process(worker_env: dict[str, str], overrides: dict[str, str]):
    """Run the ASGI app under uvicorn with these settings ("{url}" in a value: the
    server's own base URL); yields its base URL."""
    import socket
    import subprocess
    import sys
    import time

    from tests.conftest import ARTIFACTS, ROOT

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    base = f"http://127.0.0.1:{port}"
    # An override may name the server's own address as "{url}" (its public URL, say).
    env = {**worker_env, **{name: v.replace("{url}", base) for name, v in overrides.items()}}
    ARTIFACTS.mkdir(exist_ok=True)
    log = open(ARTIFACTS / "asgi-push.log", "ab")  # noqa: SIM115 - the child's for its life
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "uvicorn",
            "config.asgi:application",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--log-level",
            "warning",
        ],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    deadline = time.monotonic() + 30
    while True:
        if process.poll() is not None:
            raise RuntimeError("uvicorn exited at start; see artifacts/asgi-push.log")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            break
        except OSError:
            if time.monotonic() > deadline:
                process.kill()
                raise RuntimeError("uvicorn did not listen in 30s") from None
            time.sleep(0.1)
    try:
        yield base
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
