"""Workers started with their own settings, while the session's worker stands aside."""

from __future__ import annotations

import socket
import uuid

import pytest

from notify.celery import app
from tests.conftest import WorkerProcess

QUEUES = ("high", "medium", "low")


@pytest.fixture
def workers_with(worker_env, celery_worker, pipeline):
    """Start workers with extra environment (e.g. a tighter rate limit).

    The session worker stops consuming meanwhile, so only the new workers (with their
    settings) take messages; it consumes again afterwards.
    """
    session_worker = [f"{celery_worker.name}@{socket.gethostname()}"]
    for queue in QUEUES:
        app.control.cancel_consumer(queue, destination=session_worker, reply=True)
    started: list[WorkerProcess] = []

    def start(*, count: int = 1, queues: str = "high,medium,low", **overrides: str):
        env = {**worker_env, **overrides}
        for _ in range(count):
            worker = WorkerProcess(env, name=f"custom-{uuid.uuid4().hex[:6]}", queues=queues)
            worker.start()
            started.append(worker)
        return started

    yield start
    for worker in started:
        worker.stop()
    for queue in QUEUES:
        app.control.add_consumer(queue, destination=session_worker, reply=True)
