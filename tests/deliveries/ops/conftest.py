"""Helpers for the operations tests: reading /metrics the way Prometheus would."""

from __future__ import annotations

import socket

import pytest
from django.test import Client
from prometheus_client.parser import text_string_to_metric_families


def closed_port() -> int:
    """A local port nothing listens on: connecting to it is refused at once."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Scrape:
    """One /metrics answer, parsed: samples looked up by name and labels."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.samples = [
            sample for family in text_string_to_metric_families(text) for sample in family.samples
        ]

    def value(self, name: str, **labels: str) -> float | None:
        for sample in self.samples:
            if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items()):
                return sample.value
        return None

    def labels_of(self, name: str, label: str) -> set[str]:
        return {s.labels[label] for s in self.samples if s.name == name and label in s.labels}


@pytest.fixture
def scrape():
    """GET /metrics from loopback (no token configured in tests) and parse it."""

    def get() -> Scrape:
        response = Client().get("/metrics")
        assert response.status_code == 200, response.content
        assert response["Content-Type"].startswith("text/plain")
        return Scrape(response.content.decode())

    return get
