#!/usr/bin/env bash
# Write the lock files from pyproject.toml with pip-tools (pip-compile, from .venv):
#   requirements.txt      the runtime dependencies and the build backend (the Dockerfile)
#   requirements-dev.txt  the same pins plus the [dev] extra (scripts/bootstrap.sh)
# Every pin carries the sha256 of each of its files on PyPI, so pip installs them with
# --require-hashes. A pin that still satisfies pyproject.toml is kept; arguments go to
# pip-compile: `--upgrade` moves every pin to the newest allowed release,
# `--upgrade-package NAME` moves one. Resolved for CPython 3.11 on Linux, where the
# project runs; the hashes cover every platform's files of each pinned release.
# Quiet on success; on failure prints pip-compile's output and exits non-zero.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

pip_compile=.venv/bin/pip-compile
[ -x "$pip_compile" ] || {
    echo "lock: $pip_compile is missing: run scripts/bootstrap.sh first" >&2
    exit 1
}

# The header of each file names the command that rewrites it.
export CUSTOM_COMPILE_COMMAND="make lock"
common=(
    --quiet
    --generate-hashes
    --allow-unsafe
    --all-build-deps
    --strip-extras
    --no-emit-index-url
    --no-emit-find-links
    --no-emit-trusted-host
)

log=$(mktemp)
trap 'rm -f "$log"' EXIT
if ! {
    "$pip_compile" "${common[@]}" "$@" -o requirements.txt pyproject.toml &&
        # The dev lock is constrained by the runtime lock: the image and .venv run the
        # same versions of everything they share.
        "$pip_compile" "${common[@]}" "$@" --extra dev -c requirements.txt \
            -o requirements-dev.txt pyproject.toml
} >"$log" 2>&1; then
    cat "$log" >&2
    echo "lock: pip-compile failed (output above)" >&2
    exit 1
fi
