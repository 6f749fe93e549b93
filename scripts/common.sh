# Sourced by the process scripts (web.sh, stream.sh, worker.sh, beat.sh, manage.sh): run from the
# repository root, and take programs from the repo's .venv when there is one (a local
# checkout) or else from PATH (the Docker image, which has no .venv).
# shellcheck shell=bash

cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 1

# tool NAME -> prints the path of the program NAME to run.
tool() {
    if [ -x ".venv/bin/$1" ]; then
        printf '%s\n' ".venv/bin/$1"
    elif command -v "$1" >/dev/null 2>&1; then
        command -v "$1"
    else
        echo "$(basename "$0"): $1 is not installed (no .venv/bin/$1, none on PATH);" \
            "run scripts/bootstrap.sh" >&2
        exit 127
    fi
}

# app_loads_or_exit MODULE SERVER -> loads the app once, as each server process will; if it
# refuses (a weak SECRET_KEY with DEBUG off, a bad setting), exits non-zero with its
# reason instead of handing a refusing app to a process manager that would restart it.
app_loads_or_exit() {
    local python
    python=$(tool python)
    if ! "$python" -c "import $1"; then
        echo "$(basename "$0"): the application refused to start (the reason is above); $2 not started" >&2
        exit 1
    fi
}

# low_priority NICENESS POLICY -> prints the command prefix that runs campaign work below
# transactional work: `nice -n NICENESS` (0: none) after POLICY's, where "idle" is Linux's
# SCHED_IDLE through chrt (util-linux; an unprivileged process may lower itself to it) and
# "other" the usual policy. An unknown POLICY stops the script (exit 2).
low_priority() {
    local prefix=()
    case $2 in
    idle)
        if command -v chrt >/dev/null 2>&1 && chrt --idle 0 true 2>/dev/null; then
            prefix=(chrt --idle 0)
        else
            echo "$(basename "$0"): SCHED_IDLE is not available here (chrt missing or refused);" \
                "campaign work runs with its nice level only" >&2
        fi
        ;;
    other) ;;
    *)
        echo "$(basename "$0"): unknown scheduling policy '$2' (idle or other)" >&2
        exit 2
        ;;
    esac
    if [ "$1" != 0 ]; then
        prefix+=(nice -n "$1")
    fi
    printf '%s\n' "${prefix[*]}"
}
