"""Run one campaign statement as a `low` task's thread does (it takes one of the host's
campaign statement slots): connect, print "ready", wait for a line on standard input,
run a statement of SECONDS, then print when PostgreSQL began and ended it, as JSON:
{"began": epoch seconds, "ended": epoch seconds}.

Usage: python -m tests.scripts.campaign_statement SECONDS
"""

from __future__ import annotations

import json
import os
import sys

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.settings")
django.setup()

from django.db import connection  # noqa: E402

from flow.campaign_statements import campaign_statements_limited  # noqa: E402


def main() -> None:
    seconds = float(sys.argv[1])
    campaign_statements_limited()
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")  # connected before the start
        print("ready", flush=True)
        sys.stdin.readline()
        cursor.execute(
            "SELECT extract(epoch FROM clock_timestamp()), pg_sleep(%s), "
            "extract(epoch FROM clock_timestamp())",
            [seconds],
        )
        began, _, ended = cursor.fetchone()
    print(json.dumps({"began": float(began), "ended": float(ended)}), flush=True)


if __name__ == "__main__":
    main()
