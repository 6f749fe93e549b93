"""Ports chosen before they are bound: the tests' peers and processes, the test broker
cluster's nodes, the bench's servers.

A port taken from the kernel (`bind` to port 0) and bound again later comes from the
ephemeral range, the same range every outgoing connection on the machine takes its
local port from: in between, a connection to PostgreSQL, RabbitMQ or a peer could take
it, and the later bind fails with "Address already in use" (seen in CI, once in some
1,400 tests). So the ports come from below that range, which connections never use,
each test process (pytest-xdist's gw0, gw1, …) from a block of its own so two processes
never pick the same one (a run without pytest-xdist, the bench among them, takes the last
block); each is checked free when chosen, and none is handed out twice in a process.
This module may not import Django: tests/settings.py uses it.
"""

from __future__ import annotations

import os
import random
import socket

PORTS_FROM = 10_000  # below it: well-known and registered services' ports
BLOCK = 1_000  # ports per test process
MAIN_BLOCK = 9  # the block of a run without pytest-xdist (and of the `alone` tests)
EPHEMERAL_RANGE = "/proc/sys/net/ipv4/ip_local_port_range"
ATTEMPTS = 200

_given: set[int] = set()


def _ephemeral_floor() -> int:
    """The first port of the kernel's ephemeral range (Linux's default when unknown)."""
    try:
        with open(EPHEMERAL_RANGE, encoding="ascii") as ranges:
            return int(ranges.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32_768


def _block_index() -> int:
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    number = worker.removeprefix("gw")
    return int(number) % MAIN_BLOCK if number.isdigit() else MAIN_BLOCK


def _is_free(port: int) -> bool:
    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def unused_port() -> int:
    """A loopback port nothing listens on, outside the ephemeral range, not handed out
    before in this process. Falls back to one from the kernel when the range below the
    ephemeral ports is too small to hold the blocks (an unusual kernel setting)."""
    start = PORTS_FROM + _block_index() * BLOCK
    if start + BLOCK <= _ephemeral_floor():
        for _ in range(ATTEMPTS):
            port = random.randrange(start, start + BLOCK)
            if port not in _given and _is_free(port):
                _given.add(port)
                return port
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    _given.add(port)
    return port
