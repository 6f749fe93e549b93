"""Print the tests that failed or errored in the given JUnit XML files, one per line with
the first line of its message, so the last lines of a long `make test` say what broke.

Usage: python scripts/test_failures.py artifacts/junit-tests.xml artifacts/junit-alone.xml
A file that is missing (its pytest run never started) is named as such.
"""

from __future__ import annotations

import sys
import xml.etree.ElementTree as ElementTree
from pathlib import Path

# Enough of a message to recognise it; the full text is in the pytest output above.
MESSAGE_CHARS = 300


def failures_of(path: Path) -> list[str]:
    """One line per failed or errored test case in one JUnit XML file."""
    lines = []
    for case in ElementTree.parse(path).iter("testcase"):
        for outcome in ("failure", "error"):
            found = case.find(outcome)
            if found is None:
                continue
            name = f"{case.get('classname', '')}::{case.get('name', '')}"
            message = (found.get("message") or found.text or "").strip().splitlines()
            first = message[0][:MESSAGE_CHARS] if message else ""
            lines.append(f"{outcome.upper()} {name}: {first}")
    return lines


def main(paths: list[str]) -> int:
    """Print every file's failures and their count; always 0: make keeps pytest's status."""
    found = 0
    for name in paths:
        path = Path(name)
        if not path.exists():
            print(f"{name}: missing (that pytest run did not write it)")
            continue
        for line in failures_of(path):
            print(line)
            found += 1
    print(f"{found} failed or errored test(s) in {', '.join(paths)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
