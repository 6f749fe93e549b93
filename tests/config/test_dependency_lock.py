"""The lock files pin what pyproject.toml declares, and .venv runs what they pin.

requirements.txt (runtime and build backend, for the image) and requirements-dev.txt
(the same plus the [dev] extra, for .venv) are written by `make lock`. A range changed
in pyproject.toml without `make lock`, or a .venv that drifted from the lock, fails here.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from importlib import metadata

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from tests.processes import ROOT

RUNTIME_LOCK = ROOT / "requirements.txt"
DEV_LOCK = ROOT / "requirements-dev.txt"

# A pin starts a line ("name==version \"); its hashes follow on indented lines.
PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+)")
HASH = re.compile(r"^\s+--hash=sha256:[0-9a-f]{64}")


@dataclass(frozen=True)
class Declared:
    runtime: tuple[Requirement, ...]
    dev: tuple[Requirement, ...]
    build: tuple[Requirement, ...]


def _declared() -> Declared:
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())

    def parse(lines: list[str]) -> tuple[Requirement, ...]:
        found = (Requirement(line) for line in lines)
        return tuple(req for req in found if req.marker is None or req.marker.evaluate())

    return Declared(
        runtime=parse(pyproject["project"]["dependencies"]),
        dev=parse(pyproject["project"]["optional-dependencies"]["dev"]),
        build=parse(pyproject["build-system"]["requires"]),
    )


def _pins(path) -> dict[str, Version]:
    """Canonical name → pinned version; every pin must carry at least one hash."""
    pins: dict[str, Version] = {}
    hashes: dict[str, int] = {}
    current = None
    for line in path.read_text().splitlines():
        if match := PIN.match(line):
            current = canonicalize_name(match.group(1))
            assert current not in pins, f"{path.name} pins {current} twice"
            pins[current] = Version(match.group(2))
            hashes[current] = 0
        elif current and HASH.match(line):
            hashes[current] += 1
    unhashed = sorted(name for name, count in hashes.items() if count == 0)
    assert not unhashed, f"{path.name} pins without a hash: {unhashed}; run `make lock`"
    return pins


def _outside_the_lock(requirements, pins: dict[str, Version]) -> list[str]:
    problems = []
    for req in requirements:
        pinned = pins.get(canonicalize_name(req.name))
        if pinned is None:
            problems.append(f"{req} is not pinned")
        elif not req.specifier.contains(pinned, prereleases=True):
            problems.append(f"{req} is pinned at {pinned}, outside its range")
    return problems


def test_the_runtime_lock_pins_every_runtime_dependency_within_its_range():
    declared = _declared()
    problems = _outside_the_lock(declared.runtime + declared.build, _pins(RUNTIME_LOCK))
    assert not problems, f"requirements.txt: {problems}; run `make lock`"


def test_the_dev_lock_pins_every_declared_dependency_within_its_range():
    declared = _declared()
    problems = _outside_the_lock(declared.runtime + declared.dev + declared.build, _pins(DEV_LOCK))
    assert not problems, f"requirements-dev.txt: {problems}; run `make lock`"


def test_the_dev_lock_runs_the_same_versions_as_the_image():
    dev = _pins(DEV_LOCK)
    differ = {
        name: (str(version), str(dev.get(name)))
        for name, version in _pins(RUNTIME_LOCK).items()
        if dev.get(name) != version
    }
    assert not differ, (
        f"requirements.txt and requirements-dev.txt disagree (runtime, dev): {differ}; "
        "run `make lock`"
    )


def test_the_venv_runs_the_locked_versions_of_what_pyproject_declares():
    declared = _declared()
    pins = _pins(DEV_LOCK)
    drifted = {}
    for req in declared.runtime + declared.dev + declared.build:
        name = canonicalize_name(req.name)
        try:
            installed = Version(metadata.version(name))
        except metadata.PackageNotFoundError:
            installed = None
        if installed != pins.get(name):
            drifted[name] = (str(installed), str(pins.get(name)))
    assert not drifted, (
        f"installed versions differ from requirements-dev.txt (installed, locked): {drifted}; "
        "reinstall: rm .venv/.install.sha256 && bash scripts/bootstrap.sh"
    )
