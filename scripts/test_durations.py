"""Write tests/group_seconds.json from a run's JUnit XML: how long each group of tests
(tests/scheduling.py) took, so the next runs hand out the longest groups first.

Usage: python scripts/test_durations.py artifacts/junit-tests.xml
Groups under a few seconds are left out: unknown groups are weighed by their size.
"""

from __future__ import annotations

import json
import sys
import xml.etree.ElementTree as ElementTree
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "tests" / "group_seconds.json"
# Below this a group's place in the queue hardly moves the run's end.
SHORTEST_KEPT_SECONDS = 3.0


def file_of(classname: str) -> str | None:
    """The test file of a JUnit class name (`tests.a.test_b` or `tests.a.test_b.Class`)."""
    parts = classname.split(".")
    for end in range(len(parts), 0, -1):
        path = Path(*parts[:end]).with_suffix(".py")
        if (ROOT / path).is_file():
            return path.as_posix()
    return None


def group_seconds(junit: Path) -> dict[str, float]:
    """Seconds per group (set-up, call and tear-down), longest first."""
    from tests.scheduling import group_of

    seconds: Counter[str] = Counter()
    for case in ElementTree.parse(junit).iter("testcase"):
        path = file_of(case.get("classname", ""))
        if path is not None:
            seconds[group_of(path, alone=False)] += float(case.get("time") or 0)
    return {
        group: round(total, 1)
        for group, total in seconds.most_common()
        if total >= SHORTEST_KEPT_SECONDS
    }


def main(paths: list[str]) -> int:
    if len(paths) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    sys.path.insert(0, str(ROOT))
    found = group_seconds(Path(paths[0]))
    OUT.write_text(json.dumps(found, indent=0) + "\n")
    print(f"{OUT.relative_to(ROOT)}: {len(found)} groups, {sum(found.values()):.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
