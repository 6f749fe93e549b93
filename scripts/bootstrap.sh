#!/usr/bin/env bash
# Make .venv hold the project with its dev extras (Python 3.11), at the versions pinned
# in requirements-dev.txt (hash-checked), then the project itself, editable.
# Idempotent: skips the install while the sha256 of pyproject.toml and the lock files
# matches the stamp in .venv, so a changed pin or range reinstalls.
# Quiet on success; on failure prints pip's output and exits non-zero.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

venv=.venv
stamp=$venv/.install.sha256
locks=(requirements.txt requirements-dev.txt)

die() {
    echo "bootstrap: $*" >&2
    exit 1
}

is_py311() {
    "$1" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))' >/dev/null 2>&1
}

if [ ! -x "$venv/bin/python" ]; then
    python=""
    for candidate in python3.11 python3; do
        if command -v "$candidate" >/dev/null 2>&1 && is_py311 "$candidate"; then
            python=$candidate
            break
        fi
    done
    [ -n "$python" ] || die "Python 3.11 is required: neither python3.11 nor python3 is 3.11"
    "$python" -m venv "$venv" || die "could not create $venv with $python"
    rm -f "$stamp"
fi

is_py311 "$venv/bin/python" ||
    die "$venv does not run Python 3.11; remove it (rm -rf $venv) and run again"

# The translations' .mo files are built from the committed .po sources (with Babel, from
# the lock: scripts/compile_messages.py); a no-op while none changed.
compile_messages() {
    "$venv/bin/python" -m scripts.compile_messages || die "compiling the translations failed"
}

# The front-end libraries our pages serve (Chart.js, for the admin's charts) are copied
# out of node_modules, pinned by package-lock.json (scripts/vendor_static.sh); a no-op
# while the lock and the copies are unchanged.
vendor_static() {
    bash scripts/vendor_static.sh || die "vendoring the static libraries failed"
}

want=$(cat pyproject.toml "${locks[@]}" | sha256sum | cut -d' ' -f1)
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
    compile_messages
    vendor_static
    exit 0
fi

log=$(mktemp)
trap 'rm -f "$log"' EXIT
if ! {
    # pip itself is pinned there too. The project declares no packages; the build
    # backend it needs (setuptools) comes from the lock, so no isolated build fetches one.
    # --no-compile: byte-compiling every installed module was a third of a fresh install
    # (95 s against 61 s here); Python compiles what a process imports on first import,
    # into this writable venv, a second or two for the whole test suite's collection
    # (the Makefile unexports PYTHONDONTWRITEBYTECODE, which would keep it from doing so).
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-compile \
        --require-hashes -r requirements-dev.txt &&
        "$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-compile \
            --no-deps --no-build-isolation -e .
} >"$log" 2>&1; then
    cat "$log" >&2
    die "installing requirements-dev.txt and the project failed (output above)"
fi
echo "$want" >"$stamp"
compile_messages
vendor_static
