# Every target installs what it needs (scripts/bootstrap.sh is a no-op when nothing changed).
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.NOTPARALLEL:

VENV := .venv
RUFF := $(VENV)/bin/ruff

.PHONY: run test lint fmt bench flower bootstrap services

## run: the whole local stack with demo data (web, one worker per queue, beat)
run:
	bash scripts/run-stack.sh

## test: lint, then the whole suite against the real PostgreSQL, RabbitMQ and Redis
test: bootstrap services
	bash scripts/browser.sh
	$(RUFF) check .
	$(RUFF) format --check .
	$(VENV)/bin/pytest

lint: bootstrap
	$(RUFF) check .
	$(RUFF) format --check .

fmt: bootstrap
	$(RUFF) format .
	$(RUFF) check --fix .

bench:
	@if [ -f bench/__main__.py ]; then \
		bash scripts/bootstrap.sh && bash scripts/services.sh && $(VENV)/bin/python -m bench; \
	else \
		echo "There is no bench package yet (bench/__main__.py); nothing to run."; \
	fi

## flower: Celery monitoring on http://127.0.0.1:5555 (needs the workers from `make run`)
flower: bootstrap services
	$(VENV)/bin/celery -A notify flower --address=127.0.0.1 --port=5555

bootstrap:
	@bash scripts/bootstrap.sh

services:
	@bash scripts/services.sh
