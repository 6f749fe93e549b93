"""Compile the translations (`<app>/locale/<lang>/LC_MESSAGES/*.po`, committed) into the
`.mo` files Django reads (built, not committed), with Babel.

Not `manage.py compilemessages`: that runs GNU gettext's msgfmt, which a fresh CI machine
or the slim image need not have (and installing system packages is not a build step of
ours), while Babel is already in the lock. Only a `.mo` older than its `.po` is written,
so a run with nothing changed does nothing. A translation whose placeholders differ from
its source (`%(category)s` lost, say) fails the run, naming it.

    python -m scripts.compile_messages          # what scripts/bootstrap.sh and the image run
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from babel.messages.mofile import write_mo
from babel.messages.pofile import read_po

ROOT = Path(__file__).resolve().parent.parent


def sources(root: Path = ROOT) -> list[Path]:
    """Every app's catalog sources."""
    return sorted(root.glob("*/locale/*/LC_MESSAGES/*.po"))


def compile_catalog(po: Path) -> list[str]:
    """Write `po`'s `.mo` beside it; the problems that stop it (empty: written)."""
    with po.open("rb") as source:
        catalog = read_po(source, locale=po.parent.parent.name)
    problems = [
        f"{po.relative_to(ROOT)}: {message.id!r}: {error}"
        for message, errors in catalog.check()
        for error in errors
    ]
    if problems:
        return problems
    mo = po.with_suffix(".mo")
    partial = mo.with_suffix(".mo.partial")
    with partial.open("wb") as out:
        write_mo(out, catalog)  # fuzzy entries are left out, as msgfmt leaves them
    os.replace(partial, mo)  # a reader never sees half a file
    return []


def main() -> int:
    problems = []
    for po in sources():
        mo = po.with_suffix(".mo")
        if mo.exists() and mo.stat().st_mtime >= po.stat().st_mtime:
            continue
        problems += compile_catalog(po)
    for problem in problems:
        print(f"compile_messages: {problem}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
