# Every target installs what it needs (scripts/bootstrap.sh is a no-op when nothing changed).
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.NOTPARALLEL:

VENV := .venv
RUFF := $(VENV)/bin/ruff
# Python keeps each module it compiles (__pycache__, ignored by git), so a process starts
# from bytecode rather than compiling Django, Celery and the project again. A machine
# may set PYTHONDONTWRITEBYTECODE for everything it runs (this project's CI machine
# does): then nothing is ever kept, and every process start compiled what it imports,
# about 6.5 s of a CPU for a worker instead of 2 (measured under the suite's load), in
# a suite that starts a few hundred processes.
unexport PYTHONDONTWRITEBYTECODE
# Test processes side by side (pytest-xdist): most tests wait on workers and peers, so
# three keep both cores busy; `make test TEST_PROCESSES=0` runs them in one process. Tests
# marked `alone` (they time a 3-node cluster or a producer against its own idle figure, or
# restart a broker node of their own) run after, in two processes (tests/scheduling.py):
# the producer fairness test beside the others, which start once it has measured.
TEST_PROCESSES ?= 3

.PHONY: run test lint fmt bench flower lock bootstrap services

## run: the whole local stack with demo data: the Procfile's processes, via honcho
run:
	bash scripts/run-stack.sh

## test: lint, then the whole suite against the real PostgreSQL, RabbitMQ and Redis
## (each test's time is kept in artifacts/junit-*.xml, to compare two runs test by test)
test: bootstrap services
	bash scripts/browser.sh
	$(RUFF) check .
	$(RUFF) format --check .
	$(VENV)/bin/lint-imports
	rc=0; \
	$(VENV)/bin/pytest -n $(TEST_PROCESSES) --dist loadgroup -m "not alone" --durations=15 \
		--junitxml=artifacts/junit-tests.xml || rc=$$?; \
	$(VENV)/bin/pytest -n 2 --dist loadgroup -m alone --durations=5 --junitxml=artifacts/junit-alone.xml || rc=$$?; \
	if [ $$rc -ne 0 ]; then \
		$(VENV)/bin/python scripts/test_failures.py artifacts/junit-tests.xml artifacts/junit-alone.xml; \
	fi; \
	exit $$rc

## lint: ruff, and the import-linter contract (.importlinter): imports run one way
lint: bootstrap
	$(RUFF) check .
	$(RUFF) format --check .
	$(VENV)/bin/lint-imports

fmt: bootstrap
	$(RUFF) format .
	$(RUFF) check --fix .

## bench: the shipped processes against bare baselines, as ratios (standalone, ~5 min)
bench: bootstrap services
	$(VENV)/bin/python -m bench

## flower: Celery monitoring on http://127.0.0.1:5555 (needs the workers from `make run`),
## behind basic auth: FLOWER_BASIC_AUTH=user:password (required)
flower: bootstrap services
	@[ -n "$${FLOWER_BASIC_AUTH:-}" ] || { echo "set FLOWER_BASIC_AUTH=user:password" >&2; exit 2; }
	$(VENV)/bin/celery -A config flower --address=127.0.0.1 --port=5555 \
		--basic_auth="$$FLOWER_BASIC_AUTH"

## lock: rewrite requirements.txt and requirements-dev.txt from pyproject.toml, keeping the
## pins that still fit; `make lock ARGS=--upgrade` moves them all to the newest allowed,
## `make lock ARGS="--upgrade-package celery"` one
lock: bootstrap
	bash scripts/lock.sh $(ARGS)

bootstrap:
	@bash scripts/bootstrap.sh

services:
	@bash scripts/services.sh
