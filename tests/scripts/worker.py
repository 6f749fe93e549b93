"""The tests' Celery worker: Celery's own worker (`app.Worker`, what `celery worker`
builds), started without Celery's command line.

The command line loads every `celery.commands` plugin (Flower and its web framework) and
the interactive shell's prompt library before it parses a flag: about 1.3 s of a CPU of
the 3.5 s a prefork worker costs to start on this machine's two cores, and the suite
starts a few dozen. The shipped command (scripts/worker.sh, `celery -A config worker`) is
still what the cluster deployment and the process-priority tests start.

Usage: python -m tests.scripts.worker NAME@HOST QUEUES POOL CONCURRENCY
"""

from __future__ import annotations

import sys


def main(hostname: str, queues: str, pool: str, concurrency: str) -> int:
    from celery.concurrency import get_implementation
    from celery.utils.nodenames import default_nodename, host_format

    from config.celery import app

    # What the command line's options make of the same flags (-n, -Q, -P).
    worker = app.Worker(
        hostname=host_format(default_nodename(hostname)),
        queues=queues.split(","),
        pool_cls=get_implementation(pool),
        concurrency=int(concurrency),
        loglevel="INFO",
        without_gossip=True,
        without_mingle=True,
    )
    worker.start()
    return worker.exitcode


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
