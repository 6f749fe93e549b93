"""Ports chosen ahead of their bind (scripts/ports.py) stay out of the kernel's ephemeral
range, so no outgoing connection can take one before its server binds it."""

from __future__ import annotations

import socket

from scripts import ports


def test_ports_come_from_below_the_ephemeral_range_each_free_and_never_twice(monkeypatch):
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw2")
    monkeypatch.setattr(ports, "_given", set())
    chosen = [ports.unused_port() for _ in range(50)]
    assert len(set(chosen)) == 50
    assert all(12_000 <= port < 13_000 for port in chosen)  # gw2's block
    assert max(chosen) < ports._ephemeral_floor()
    with socket.socket() as server:  # and each can be bound
        server.bind(("127.0.0.1", chosen[0]))


def test_a_port_something_listens_on_is_not_handed_out(monkeypatch):
    # A block of two ports away from the suite's own blocks (another test process may be
    # using those), the first of them taken by a listener here.
    first = next(p for p in range(29_000, 30_000, 2) if ports._is_free(p) and ports._is_free(p + 1))
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw0")
    monkeypatch.setattr(ports, "PORTS_FROM", first)
    monkeypatch.setattr(ports, "BLOCK", 2)
    monkeypatch.setattr(ports, "_given", set())
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", first))
        taken.listen()
        assert ports.unused_port() == first + 1
